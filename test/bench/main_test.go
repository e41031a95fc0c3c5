package bench

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundcloud/groundcloud/internal/sandbox"
)

// Our binaries, built once by TestMain when benchmarks run.
var ccmBinary, agentBinary, nodesimBinary string

func TestMain(m *testing.M) {
	flag.Parse()
	if os.Getenv("GROUNDCLOUD_BENCH") == "" || testing.Short() {
		os.Exit(m.Run()) // each benchmark skips
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "groundcloud-bench-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	bins, err := sandbox.BuildBinaries(context.Background(), dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ccmBinary, agentBinary, nodesimBinary = bins.ControllerManager, bins.Agent, bins.NodeSim
	return m.Run()
}

func skipUnlessBench(t *testing.T) {
	t.Helper()
	if os.Getenv("GROUNDCLOUD_BENCH") == "" || testing.Short() {
		t.Skip("benchmark: run with make bench (GROUNDCLOUD_BENCH=1)")
	}
}

// createLoadBalancer creates svc (type LoadBalancer) and returns its first
// ingress address once the controller manager has written it.
func createLoadBalancer(t *testing.T, e *sandbox.Env, svc *v1.Service) netip.Addr {
	t.Helper()
	_, err := e.Client.CoreV1().Services(svc.Namespace).Create(t.Context(), svc, metav1.CreateOptions{})
	must(t, err)
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		s, err := e.Client.CoreV1().Services(svc.Namespace).Get(t.Context(), svc.Name, metav1.GetOptions{})
		if err == nil && len(s.Status.LoadBalancer.Ingress) > 0 {
			return netip.MustParseAddr(s.Status.LoadBalancer.Ingress[0].IP)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("service %s/%s got no address", svc.Namespace, svc.Name)
	return netip.Addr{}
}

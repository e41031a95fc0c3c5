package bench

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/groundcloud/groundcloud/internal/annotation"
	"github.com/groundcloud/groundcloud/test/framework/apionly"
	"github.com/groundcloud/groundcloud/test/framework/controlplane"
	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

// probeTrials is how many Services each setting of the probe benchmark
// creates, one after the other.
const probeTrials = 20

// probeSettings are the agents' --address-probes the benchmark compares:
// the default (probe before the first announcement) and none.
var probeSettings = []string{"3", "0"}

// probeBed is one kind of test bed of the probe benchmark: its
// load-balancer hosts and how their agents hold the addresses.
type probeBed struct {
	Name    string // in the BENCH line
	Title   string // in docs/benchmarks.md
	LBHosts int
}

// probeBeds: two agents sharing the addresses over memberlist, and a lone
// agent (--vip-ownership=all), which probes the same way.
var probeBeds = []probeBed{
	{Name: "memberlist", Title: "two hosts, `memberlist`", LBHosts: 2},
	{Name: "lone", Title: "one host, `all`", LBHosts: 1},
}

// TestAddressProbeBenchmark measures what probing a new address before it
// is first announced (docs/high-availability.md, "Addresses in use by
// another station") costs a new Service: the time from its address in
// the Service's status to the first TCP connection a client on the link
// gets through (it dials every 20 ms from before the Service exists),
// with the agents' --address-probes at 3 (the default: 3 probes 100 ms
// apart) and at 0, side by side: two load-balancer hosts sharing the
// addresses over memberlist, and a lone one (--vip-ownership=all); real
// agents, apiserver and kernel (the API-only test bed), one bed per bed
// kind and setting in one run. See
// docs/benchmarks.md, section "Address probes".
func TestAddressProbeBenchmark(t *testing.T) {
	skipUnlessBench(t)
	start := time.Now()
	tools, err := controlplane.ToolsDir(t.Context())
	must(t, err)
	binDir := t.TempDir()
	bins, err := apionly.BuildBinaries(t.Context(), binDir)
	must(t, err)
	res := map[string][]time.Duration{} // by bed name and setting
	for _, bed := range probeBeds {
		for _, setting := range probeSettings {
			res[bed.Name+setting] = probeRun(t, tools, bins, bed, setting)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "BENCH address-probes trials=%d", probeTrials)
	for _, bed := range probeBeds {
		for _, s := range probeSettings {
			d := res[bed.Name+s]
			fmt.Fprintf(&b, " %s_probes%s_p50=%s %s_probes%s_p90=%s", bed.Name, s, pct(d, 50), bed.Name, s, pct(d, 90))
		}
	}
	fmt.Println(b.String())
	if path := os.Getenv("GROUNDCLOUD_BENCH_DOCS"); path != "" && !t.Failed() {
		must(t, writeSection(path, "## Address probes", probeSection(t, res, time.Since(start))))
	}
}

// probeRun starts a bed whose agents run with --address-probes=setting
// and returns, per Service, address to first connection.
func probeRun(t *testing.T, tools string, bins apionly.Binaries, bed probeBed, setting string) []time.Duration {
	dir := t.TempDir()
	key := make([]byte, 32)
	_, err := rand.Read(key)
	must(t, err)
	keyFile := filepath.Join(dir, "gossip.key")
	must(t, os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600))
	const firstPort = 30080
	var ports []uint16
	for p := firstPort; p < firstPort+probeTrials; p++ {
		ports = append(ports, uint16(p))
	}
	agentArgs := []string{"--vip-ownership=all", "--address-probes=" + setting}
	if bed.LBHosts > 1 {
		agentArgs = []string{"--vip-ownership=memberlist", "--gossip-key-file=" + keyFile, "--address-probes=" + setting}
	}
	e, err := apionly.Start(t.Context(), apionly.Options{
		Topology:       netlab.Topology{LBHosts: bed.LBHosts, Clients: []string{"client"}},
		Dir:            dir,
		ToolsDir:       tools,
		Binaries:       bins,
		NodeSim:        apionly.NodeSim{TCPPorts: ports},
		ExtraAgentArgs: agentArgs,
		AgentArgs: func(e *apionly.Env, i int) []string {
			if bed.LBHosts == 1 {
				return nil
			}
			var seeds []string
			for _, h := range e.LBs {
				seeds = append(seeds, h.Addr4.String())
			}
			return []string{"--gossip-seeds=" + strings.Join(seeds, ",")}
		},
		Logf: t.Logf,
	})
	must(t, err)
	defer func() { must(t, e.Close()) }()
	client := e.Clients["client"]
	var out []time.Duration
	for i := range probeTrials {
		vip := netip.MustParseAddr(fmt.Sprintf("192.0.2.%d", 200+i))
		d, err := addressToConnection(t.Context(), e, client, fmt.Sprintf("probe-%d", i), vip, int32(firstPort+i))
		must(t, err)
		out = append(out, d)
	}
	t.Logf("%s, --address-probes=%s: address to first connection p50 %s, p90 %s, max %s", bed.Name, setting, pct(out, 50), pct(out, 90), slices.Max(out))
	return out
}

// addressToConnection creates a Service asking for vip and measures from
// its address in status to the first connection the client gets through.
func addressToConnection(ctx context.Context, e *apionly.Env, client *netlab.Host, name string, vip netip.Addr, nodePort int32) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	connected := make(chan time.Time, 1)
	go func() {
		for ctx.Err() == nil {
			dctx, dcancel := context.WithTimeout(ctx, 200*time.Millisecond)
			c, err := client.DialTCP(dctx, netip.AddrPortFrom(vip, 80))
			dcancel()
			if err == nil {
				_ = c.Close()
				connected <- time.Now()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: map[string]string{annotation.LoadBalancerIPs: vip.String()}},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080), NodePort: nodePort}},
		},
	}
	if _, err := e.Client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return 0, err
	}
	var addressed time.Time
	for addressed.IsZero() {
		s, err := e.Client.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
		if err == nil && len(s.Status.LoadBalancer.Ingress) > 0 {
			addressed = time.Now()
			break
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("service %s: no address within a minute", name)
		case <-time.After(10 * time.Millisecond):
		}
	}
	select {
	case at := <-connected:
		return max(at.Sub(addressed), 0), nil
	case <-ctx.Done():
		return 0, fmt.Errorf("service %s: %s not reachable within a minute", name, vip)
	}
}

// pct is the p-th percentile of d, rounded to milliseconds.
func pct(d []time.Duration, p int) time.Duration { return percentile(d, p).Round(time.Millisecond) }

func probeSection(t *testing.T, res map[string][]time.Duration, took time.Duration) string {
	var b strings.Builder
	b.WriteString("## Address probes\n\n")
	b.WriteString("What probing a new address before it is first announced costs a new Service\n")
	b.WriteString("(`TestAddressProbeBenchmark`, `make bench`): the time from the address in\n")
	b.WriteString("the Service's status to the first TCP connection a client on the link gets\n")
	b.WriteString("through (dialling every 20 ms from before the Service exists), for\n")
	fmt.Fprintf(&b, "%d Services created one after the other, with the agents' `--address-probes`\n", probeTrials)
	b.WriteString("at 3 (the default, 100 ms apart) and at 0, one test bed each in one run: two\n")
	b.WriteString("load-balancer hosts sharing the addresses over memberlist, and a lone one\n")
	b.WriteString("(`--vip-ownership=all`); real agents, apiserver and kernel (the API-only\n")
	b.WriteString("test bed, in network namespaces).\n\n")
	b.WriteString("| Load-balancer hosts | `--address-probes` | p50 | p90 | max |\n|---|---|---|---|---|\n")
	for _, bed := range probeBeds {
		for _, s := range probeSettings {
			d := res[bed.Name+s]
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", bed.Title, s, pct(d, 50), pct(d, 90), slices.Max(d).Round(time.Millisecond))
		}
	}
	fmt.Fprintf(&b, "\nWritten by `make bench` on %s; the benchmark took %s on:\n\n", time.Now().UTC().Format("2006-01-02"), took.Round(time.Second))
	for _, l := range machine(t) {
		fmt.Fprintf(&b, "- %s\n", l)
	}
	b.WriteString("\n")
	return b.String()
}

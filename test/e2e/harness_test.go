package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/groundcloud/groundcloud/test/framework/apionly"
	"github.com/groundcloud/groundcloud/test/framework/controlplane"
)

// monitorPeriod is the CCM's --node-monitor-period in these tests.
const monitorPeriod = time.Second

// Our binaries, built once by TestMain.
var ccmBinary, agentBinary, nodesimBinary string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "groundcloud-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	bins, err := apionly.BuildBinaries(context.Background(), dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ccmBinary, agentBinary, nodesimBinary = bins.ControllerManager, bins.Agent, bins.NodeSim
	return m.Run()
}

// cluster is one test's control plane and controller manager.
type cluster struct {
	cp         *controlplane.ControlPlane
	client     kubernetes.Interface
	configPath string
	ccmLog     string
	ccmArgs    []string
	ccm        *apionly.Process
}

// startCluster starts a control plane and the controller manager with the
// given cloud-config, with leader election on and its own kubeconfig.
func startCluster(t *testing.T, cloudConfig string) *cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test: runs etcd, kube-apiserver and our binaries")
	}
	return startClusterWith(t, controlplane.StartT(t, controlplane.Options{}), cloudConfig)
}

// startClusterWith starts the controller manager against cp.
func startClusterWith(t *testing.T, cp *controlplane.ControlPlane, cloudConfig string) *cluster {
	t.Helper()
	cl := &cluster{cp: cp, client: cp.Client()}
	dir := t.TempDir()
	cl.configPath = filepath.Join(dir, "cloud.conf")
	writeFile(t, cl.configPath, cloudConfig)
	kubeconfig, err := cp.Kubeconfig("groundcloud-controller-manager")
	if err != nil {
		t.Fatal(err)
	}
	cl.ccmLog = filepath.Join(dir, "ccm.log")
	cl.ccmArgs = []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--cloud-config=" + cl.configPath,
		"--cloud-config-reload-interval=500ms",
		"--leader-elect=true",
		"--bind-address=127.0.0.1",
		"--secure-port=0",
		"--node-monitor-period=" + monitorPeriod.String(),
		"--v=2",
	}
	cl.ccm = startProcess(t, cl.ccmLog, ccmBinary, cl.ccmArgs...)
	return cl
}

// restartCCM stops the controller manager and starts it again with the
// same flags; its log goes on in the same file.
func (cl *cluster) restartCCM(t *testing.T) {
	t.Helper()
	_ = cl.ccm.Stop()
	cl.ccm = startProcess(t, cl.ccmLog+".2", ccmBinary, cl.ccmArgs...)
	cl.ccmLog += ".2"
}

// startProcess runs a binary for the rest of the test with its output in
// logPath; it is stopped at cleanup, and its log is shown if the test failed.
func startProcess(t *testing.T, logPath, bin string, args ...string) *apionly.Process {
	t.Helper()
	p, err := apionly.StartProcess(logPath, bin, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Stop()
		if t.Failed() {
			t.Logf("last lines of %s:\n%s", filepath.Base(bin), controlplane.LogTail(logPath, 60))
		}
	})
	return p
}

// createKubeletNode creates a Node as kubelet with --cloud-provider=external
// registers it: tainted uninitialized, with the given Ready status and
// addresses.
func createKubeletNode(t *testing.T, c kubernetes.Interface, name string, ready v1.ConditionStatus, addresses ...v1.NodeAddress) {
	t.Helper()
	if err := apionly.RegisterNode(context.Background(), c, name, ready, addresses...); err != nil {
		t.Fatal(err)
	}
}

func hasTaint(n *v1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// waitNode polls the node until cond holds and returns it.
func waitNode(t *testing.T, c kubernetes.Interface, name, what string, cond func(*v1.Node) bool) *v1.Node {
	t.Helper()
	var last *v1.Node
	t.Cleanup(func() {
		if t.Failed() && last != nil {
			t.Logf("node %s as last seen: spec %+v, labels %v", name, last.Spec, last.Labels)
		}
	})
	eventually(t, "node "+name+" "+what, func() bool {
		n, err := c.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		last = n
		return cond(n)
	})
	return last
}

func waitLog(t *testing.T, path, text string) {
	t.Helper()
	eventually(t, fmt.Sprintf("%q in %s", text, filepath.Base(path)), func() bool {
		b, _ := os.ReadFile(path)
		return strings.Contains(string(b), text)
	})
}

// eventually polls cond for up to a minute. The limit is a safety net for a
// hung test, not a measure of speed.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

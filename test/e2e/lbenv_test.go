package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/groundcloud/groundcloud/test/framework/apionly"
	"github.com/groundcloud/groundcloud/test/framework/controlplane"
	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

// Ports every simulated node answers on: node ports are unique in a
// cluster, so each Service of a test takes its own from a range.
const (
	firstNodePort  = 30080
	nodePorts      = 20
	nodePortUDP    = 30053
	healthNodePort = 32001
)

// lbEnv is the sandbox topology for load-balancer tests: one LB host
// running the real agent, three nodes answering on NodePorts and health
// ports, a client inside and one outside the source ranges tests allow.
type lbEnv struct {
	*apionly.Env
	client   kubernetes.Interface
	cp       *controlplane.ControlPlane
	dyn      dynamic.Interface
	lb       *netlab.Host
	nodes    []*netlab.Host // registered at start
	late     []*netlab.Host // hosts of nodes left for the test to register (Options.Unregistered)
	inside   *netlab.Host
	outsider *netlab.Host
	stateDir string
	nextPort int32
	// ccmMetricsPort serves the controller manager's /metrics (ccmMetric).
	ccmMetricsPort int
}

// startLBEnv starts the topology; mods change the sandbox options first.
func startLBEnv(t *testing.T, mods ...func(*apionly.Options)) *lbEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test: runs etcd, kube-apiserver, our binaries and network namespaces")
	}
	tools, err := controlplane.ToolsDir(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var ports []uint16
	for p := firstNodePort; p < firstNodePort+nodePorts; p++ {
		ports = append(ports, uint16(p))
	}
	dir := t.TempDir()
	metricsPort := freePort(t)
	opts := apionly.Options{
		Topology:         netlab.Topology{Clients: []string{"client", "outsider"}},
		Dir:              dir,
		ToolsDir:         tools,
		Binaries:         apionly.Binaries{ControllerManager: ccmBinary, Agent: agentBinary, NodeSim: nodesimBinary},
		NodeSim:          apionly.NodeSim{TCPPorts: ports, UDPPorts: []uint16{nodePortUDP}, HealthPorts: []uint16{healthNodePort}},
		ExtraCloudConfig: "[Pool \"reserved\"]\naddresses = 192.0.2.220-192.0.2.229\nauto-assign = false\nforwarding = proxy\n",
		ExtraCCMArgs:     ccmMetricArgs(metricsPort),
		Logf:             t.Logf,
	}
	for _, mod := range mods {
		mod(&opts)
	}
	e, err := apionly.Start(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last lines of the controller manager:\n%s", controlplane.LogTail(e.CCMLog(), 60))
			t.Logf("last lines of the agent:\n%s", controlplane.LogTail(e.Agent(0).LogPath, 60))
		}
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	dyn, err := dynamic.NewForConfig(e.CP.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	return &lbEnv{
		Env: e, client: e.Client, cp: e.CP, dyn: dyn,
		lb: e.LBs[0], nodes: e.Nodes[:len(e.Nodes)-opts.Unregistered], late: e.Nodes[len(e.Nodes)-opts.Unregistered:], inside: e.Clients["client"], outsider: e.Clients["outsider"],
		stateDir: e.StateDir, nextPort: firstNodePort, ccmMetricsPort: metricsPort,
	}
}

// restartCCM restarts the controller manager.
func (env *lbEnv) restartCCM(t *testing.T) {
	t.Helper()
	if err := env.RestartCCM(); err != nil {
		t.Fatal(err)
	}
}

// nodePort returns a TCP node port no Service of this environment has used.
func (env *lbEnv) nodePort(t *testing.T) int32 {
	t.Helper()
	if env.nextPort >= firstNodePort+nodePorts {
		t.Fatal("out of node ports; raise nodePorts")
	}
	env.nextPort++
	return env.nextPort - 1
}

// who connects from h to addr over TCP and returns the node that answered
// and the source address it saw.
func who(ctx context.Context, h *netlab.Host, addr netip.AddrPort) (node, seen string, err error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := h.DialTCP(ctx, addr)
	if err != nil {
		return "", "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", "", err
	}
	f := strings.Fields(line)
	if len(f) < 2 {
		return "", "", fmt.Errorf("unexpected answer %q", line)
	}
	return f[0], f[1], nil
}

// spread makes n TCP connections and counts answers per node.
func spread(ctx context.Context, h *netlab.Host, addr netip.AddrPort, n int) (map[string]int, error) {
	got := map[string]int{}
	for range n {
		node, _, err := who(ctx, h, addr)
		if err != nil {
			return got, err
		}
		got[node]++
	}
	return got, nil
}

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	cloudapi "k8s.io/cloud-provider/api"

	"github.com/groundcloud/groundcloud/internal/lab"
	"github.com/groundcloud/groundcloud/internal/testbed"
)

// Ports every simulated node answers on: node ports are unique in a
// cluster, so each Service of a test takes its own from a range.
const (
	firstNodePort  = 30080
	nodePorts      = 20
	nodePortUDP    = 30053
	healthNodePort = 32001
)

// lbEnv is a cluster with load-balancer hosts and nodes in network
// namespaces: one LB host running the real agent, three nodes answering on
// NodePorts and health ports, a client inside and one outside the allowed
// source ranges.
type lbEnv struct {
	*cluster
	lab       *lab.Lab
	lb        *lab.Host
	nodes     []*lab.Host
	inside    *lab.Host // a client host
	outsider  *lab.Host // a client host outside the source ranges tests allow
	stateDir  string
	dyn       dynamic.Interface
	nextPort  int32
	agentLog  string
	agentArgs []string
	agent     *lab.Process
}

func startLBEnv(t *testing.T) *lbEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test: runs etcd, kube-apiserver, our binaries and network namespaces")
	}
	ctx := t.Context()
	env := &lbEnv{lab: lab.NewT(t, lab.Options{}), stateDir: t.TempDir(), nextPort: firstNodePort}
	env.lb = env.lab.AddHostT(t, "lb", lab.HostOptions{Forwarding: true})
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("node-%d", i)
		h := env.lab.AddHostT(t, name, lab.HostOptions{})
		ready := filepath.Join(env.stateDir, name+".log")
		if _, err := h.Start(ctx, ready, nodesimBinary,
			"--name="+name,
			"--tcp-ports="+portList(firstNodePort, nodePorts),
			fmt.Sprintf("--udp-ports=%d", nodePortUDP),
			fmt.Sprintf("--health-node-ports=%d", healthNodePort),
			"--state-dir="+env.stateDir,
		); err != nil {
			t.Fatal(err)
		}
		waitLog(t, ready, "nodesim: ready")
		env.nodes = append(env.nodes, h)
	}
	env.inside = env.lab.AddHostT(t, "client", lab.HostOptions{})
	env.outsider = env.lab.AddHostT(t, "outsider", lab.HostOptions{})

	cp := testbed.StartT(t, testbed.Options{ServiceCIDR: "10.96.0.0/16,fd00:10:96::/112"})
	env.cluster = startClusterWith(t, cp, env.cloudConfig())
	dyn, err := dynamic.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	env.dyn = dyn

	for _, n := range env.nodes {
		createKubeletNode(t, env.cluster.client, n.Name, v1.ConditionTrue)
	}
	for _, n := range env.nodes {
		waitNode(t, env.cluster.client, n.Name, "initialised", func(node *v1.Node) bool {
			return node.Spec.ProviderID != "" && !hasTaint(node, cloudapi.TaintExternalCloudProvider)
		})
	}

	// The agent runs inside the LB host; the apiserver listens on the root
	// namespace's loopback, so a forwarder listens on the same port inside.
	u, err := url.Parse(cp.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.lb.ForwardLoopback(ctx, u.Host); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := cp.Kubeconfig("groundcloud-agent")
	if err != nil {
		t.Fatal(err)
	}
	env.agentLog = filepath.Join(t.TempDir(), "agent.log")
	env.agentArgs = []string{
		"--kubeconfig=" + kubeconfig,
		"--host-name=lb",
		"--interface=" + env.lb.Iface,
		"--health-interval=300ms",
		"--health-timeout=250ms",
		"--metrics-bind-address=",
		"--v=2",
	}
	env.startAgent(t)
	return env
}

func (env *lbEnv) startAgent(t *testing.T) {
	t.Helper()
	p, err := env.lb.Start(t.Context(), env.agentLog, agentBinary, env.agentArgs...)
	if err != nil {
		t.Fatal(err)
	}
	env.agent = p
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last lines of the agent:\n%s", testbed.LogTail(env.agentLog, 80))
		}
	})
}

func (env *lbEnv) cloudConfig() string {
	var b strings.Builder
	b.WriteString("[Global]\nregion = lab\n\n")
	for _, n := range env.nodes {
		fmt.Fprintf(&b, "[Machine %q]\nzone = rack-1\ninternal-ip = %s\ninternal-ip = %s\n\n", n.Name, n.Addr4, n.Addr6)
	}
	b.WriteString("[Pool \"default\"]\naddresses = 192.0.2.200-192.0.2.219\naddresses = 2001:db8:0:1::c8-2001:db8:0:1::db\n\n")
	b.WriteString("[Pool \"reserved\"]\naddresses = 192.0.2.220-192.0.2.229\nauto-assign = false\n")
	return b.String()
}

// who connects from h to addr over TCP and returns the node that answered
// and the source address it saw.
func who(ctx context.Context, h *lab.Host, addr netip.AddrPort) (node, seen string, err error) {
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

// whoUDP sends one datagram from h to addr and returns the node that answered.
func whoUDP(ctx context.Context, h *lab.Host, addr netip.AddrPort) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	b, err := h.UDPExchange(ctx, addr, []byte("hello"))
	if err != nil {
		return "", err
	}
	f := strings.Fields(string(b))
	if len(f) < 1 {
		return "", fmt.Errorf("empty answer")
	}
	return f[0], nil
}

// spread makes n TCP connections and counts answers per node.
func spread(ctx context.Context, h *lab.Host, addr netip.AddrPort, n int) (map[string]int, error) {
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

// nodePort returns a TCP node port no Service of this environment has used.
func (env *lbEnv) nodePort(t *testing.T) int32 {
	t.Helper()
	if env.nextPort >= firstNodePort+nodePorts {
		t.Fatal("out of node ports; raise nodePorts")
	}
	env.nextPort++
	return env.nextPort - 1
}

func portList(first, n int) string {
	var ports []string
	for p := first; p < first+n; p++ {
		ports = append(ports, fmt.Sprint(p))
	}
	return strings.Join(ports, ",")
}

package clustertest

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	cloudapi "k8s.io/cloud-provider/api"

	"github.com/groundcloud/groundcloud/test/framework/controlplane"
	"github.com/groundcloud/groundcloud/test/framework/netlab"
	"github.com/groundcloud/groundcloud/test/framework/realcluster"
	"github.com/groundcloud/groundcloud/test/images/echo"
)

// TestCluster runs the real cluster: kubelets and containerd in every node,
// groundcloud installed from deploy/ as Pods, load-balancer hosts that are
// Nodes with Pods of their own. It checks the installation, a
// kubelet-registered Node initialised by our controller manager, that no
// alert of deploy/monitoring fires on the healthy cluster, then the
// load-balancer scenarios on the path users run, client → VIP → a node's
// kube-proxy → a Pod (lb_test.go): every connection answered also when the
// holder is a Node, UDP, IPv6, Local policy by where the Pods run, a node
// drained by kube-proxy's own health, source ranges, pod routes, addresses
// in use by a station on the link (conflict_test.go), a worker
// joining the running cluster (its kubelet started late) and becoming a
// backend, the apiserver away while the agents follow a node's health, the
// holder's agent killed and its link cut with a long-lived
// connection open; the agent Pod of the only host of an address deleted
// (no connection lost, the address adopted by the next agent) and that
// host retired (nothing left behind); split brains between the two hosts, measured by a
// client opening a connection every 20 ms and holding four: the owner's
// agent killed and kept dead (the other takes over and defends against the
// stale kernel; restarted, it drops what it does not own and takes its
// share back once) and gossip cut between the hosts (detected, with Events
// and metrics, and resolved, IPv4 and IPv6); a deleted Node no longer a
// backend; then that stopping the cluster left the machine as it was.
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: runs a real cluster")
	}
	if os.Geteuid() != 0 {
		t.Skip("end-to-end test: needs root")
	}
	tools, err := controlplane.ToolsDir(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// CheckHost: Close compares the machine with what Start found, both
	// under the machine-wide lock of the test-bed clusters.
	// Two load-balancer hosts that are Nodes with Pods of their own, as
	// docs/install.md sets them up by default; the sandbox (TestSandbox)
	// runs the other topology, a dedicated load-balancer host.
	c, err := realcluster.Start(t.Context(), realcluster.Options{
		Topology:      netlab.Topology{LBHosts: 2, Clients: []string{"client", "outsider"}},
		Dir:           t.TempDir(),
		ToolsDir:      tools,
		CheckHost:     true,
		Logf:          t.Logf,
		SharedLBHosts: true,
		LateWorkers:   1,
		// node-3, which joins the running cluster,
		// Pool "solo", whose addresses lb-1 alone may hold (restart_test.go).
		CloudConfigFor: soloCloudConfig,
	})
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(c.CP.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = c.Close()
		}
	})

	t.Run("installed from deploy", func(t *testing.T) { checkInstalled(t, c) })
	t.Run("node initialised", func(t *testing.T) { checkNodeInitialised(t, c, "node-1") })
	t.Run("kubernetes Service from every node", func(t *testing.T) { checkKubernetesService(t, c) })
	t.Run("LoadBalancer to pods", func(t *testing.T) { checkLoadBalancer(t, c) })
	// The scenario lives as long as the cluster; the subtests use it.
	web := deployWeb(t, c)
	withWeb := func(name string, check func(*testing.T, *lbScenario)) {
		t.Run(name, func(t *testing.T) { check(t, web) })
	}
	t.Run("no alert fires on the healthy cluster", func(t *testing.T) { checkNoAlertFires(t, c) })
	withWeb("load-balancer host is a Node", func(t *testing.T, s *lbScenario) { checkHostAsNode(t, c, dyn, s) })
	withWeb("UDP", func(t *testing.T, s *lbScenario) { checkUDP(t, c, s) })
	withWeb("pod routes", func(t *testing.T, s *lbScenario) { checkPodRoutes(t, c, s) })
	withWeb("a node without its pod routes carries no traffic", func(t *testing.T, s *lbScenario) { checkRoutesMissing(t, c, s) })
	withWeb("node drained by kube-proxy's health", func(t *testing.T, s *lbScenario) { checkDrainedNode(t, c, s) })
	withWeb("node excluded by label", func(t *testing.T, s *lbScenario) { checkExcludedNode(t, c, s) })
	t.Run("externalTrafficPolicy Local", func(t *testing.T) { checkLocalPolicy(t, c) })
	t.Run("a new Local Service answered from its first connection and across agent restarts", func(t *testing.T) { checkLocalFromTheStart(t, c) })
	t.Run("a Service switched from Cluster to Local", func(t *testing.T) { checkLocalSwitch(t, c, dyn) })
	t.Run("source ranges", func(t *testing.T) { checkSourceRanges(t, c) })
	t.Run("the holder's own node the only backend", func(t *testing.T) { checkOwnNodeOnly(t, c, dyn) })
	t.Run("shared address, deleted and reused", func(t *testing.T) { checkSharedAddress(t, c) })
	t.Run("addresses in use by a station on the link: not announced until it lets them go", func(t *testing.T) { checkAddressInUse(t, c) })
	withWeb("load-balancer host retired", func(t *testing.T, s *lbScenario) { checkHostRetired(t, c, dyn, s) })
	t.Run("passthrough", func(t *testing.T) { checkPassthrough(t, c) })
	// Its last check pulls a cable.
	withWeb("pod network back", func(t *testing.T, s *lbScenario) { waitPodNetwork(t, c, s) })
	withWeb("apiserver away", func(t *testing.T, s *lbScenario) { checkAPIServerAway(t, c, dyn, s) })
	joined := t.Run("a node joining the running cluster", func(t *testing.T) {
		checkNodeJoins(t, c, web, "node-3")
	})
	// The agent of the only host of an address restarted, then retired
	// (restart_test.go).
	solo := newSoloRestart(t, c, dyn)
	t.Run("agent Pod deleted on the only host of an address: no connection lost, the next agent adopts it", solo.checkRestarted)
	t.Run("agent of the only host of an address stopped for good: nothing left behind", solo.checkRetired)
	solo.stop(t)
	t.Run("agents rolled out (kubectl rollout restart) with two hosts: no connection lost, passthrough and proxy", func(t *testing.T) {
		checkAgentsRolledOut(t, c, dyn, nil)
	})
	t.Run("a load-balancer host drained, rebooted and uncordoned: its addresses move first, no connection lost", func(t *testing.T) {
		checkDrainAndReboot(t, c, dyn)
	})
	// Failovers with a Local Service on the workers: see deployOnWorkers.
	steady := deployOnWorkers(t, c, "steady")
	t.Run("agent container killed", func(t *testing.T) { checkFailover(t, c, dyn, steady) })
	t.Run("holder's link down", func(t *testing.T) { checkLinkDown(t, c, dyn, steady) })
	// The hosts' kernels and agents disagree (splitbrain_test.go); later
	// checks need the first's addresses.
	sb := newSplitBrain(newHAScenario(t, c, dyn, "ha", localProxy))
	if t.Run("split brain: agents find each other and share the addresses", sb.checkShared) {
		t.Run("split brain: kill -9 of the owner's agent: the other takes over and defends against the stale kernel", sb.checkKilled)
		t.Run("split brain: the restarted agent drops what it does not own and takes its share back once", sb.checkRestarted)
		t.Run("split brain: gossip cut between the hosts: detected and resolved, IPv4 and IPv6", sb.checkGossipCut)
	}
	// Last: later checks would look the Node up.
	if joined {
		withWeb("a deleted node stops being a backend", func(t *testing.T, s *lbScenario) { checkNodeDeleted(t, c, s, "node-3") })
	}
	if t.Failed() {
		for _, log := range c.Logs() {
			t.Logf("tail of %s:\n%s", log, controlplane.LogTail(log, 30))
		}
		for _, n := range c.Nodes {
			if n.LoadBalancer {
				logPodTails(t, n, 80, "groundcloud-agent")
			}
		}
	}

	sb.stop()
	closed = true
	err = c.Close()
	t.Run("machine as before", func(t *testing.T) {
		if err != nil {
			t.Error(err)
		}
	})
}

// checkInstalled: our components run as Pods of deploy/'s workloads, from
// the images built from deploy/images/: the controller manager's two
// replicas on the Pod network, an agent on the host network of each
// load-balancer host, a router on every node; kube-proxy on every node.
func checkInstalled(t *testing.T, c *realcluster.Cluster) {
	pods, err := c.Client.CoreV1().Pods(metav1.NamespaceSystem).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	running := map[string][]corev1.Pod{}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning {
			app := p.Labels["app.kubernetes.io/name"]
			if app == "" {
				app = p.Labels["k8s-app"]
			}
			running[app] = append(running[app], p)
		}
	}
	want := []struct {
		app         string
		image       string
		nodes       []string
		hostNetwork bool
	}{
		{"groundcloud-controller-manager", c.Images.ControllerManager.Ref, nil, false},
		{"groundcloud-agent", c.Images.Agent.Ref, []string{"lb-1", "lb-2"}, true},
		{"groundcloud-router", c.Images.Router.Ref, []string{"lb-1", "lb-2", "node-1", "node-2"}, true},
		{"kube-proxy", c.Images.KubeProxy.Ref, []string{"lb-1", "lb-2", "node-1", "node-2"}, true},
	}
	for _, w := range want {
		ps := running[w.app]
		var nodes []string
		for _, p := range ps {
			nodes = append(nodes, p.Spec.NodeName)
			if got := p.Spec.Containers[0].Image; got != w.image {
				t.Errorf("%s runs image %s, want %s", p.Name, got, w.image)
			}
			if p.Spec.HostNetwork != w.hostNetwork {
				t.Errorf("%s: hostNetwork %t, want %t", p.Name, p.Spec.HostNetwork, w.hostNetwork)
			}
			if !w.hostNetwork && !podNetwork(c, p.Status.PodIP) {
				t.Errorf("%s has address %s, outside the pod network %s", p.Name, p.Status.PodIP, c.Opts.ClusterCIDR)
			}
		}
		slices.Sort(nodes)
		switch {
		case w.nodes == nil && len(ps) != 2:
			t.Errorf("%s: %d Pods running, want 2", w.app, len(ps))
		case w.nodes != nil && !slices.Equal(nodes, w.nodes):
			t.Errorf("%s runs on %v, want %v", w.app, nodes, w.nodes)
		}
	}
}

func podNetwork(c *realcluster.Cluster, ip string) bool {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return false
	}
	for _, s := range strings.Split(c.Opts.ClusterCIDR, ",") {
		if netip.MustParsePrefix(s).Contains(a) {
			return true
		}
	}
	return false
}

// checkNodeInitialised: the Node was registered by a real kubelet on
// containerd, and our controller manager initialised it from the
// cloud-config's inventory.
func checkNodeInitialised(t *testing.T, c *realcluster.Cluster, name string) {
	n, err := c.Client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	info := n.Status.NodeInfo
	if info.KubeletVersion != "v1.37.2" || !strings.HasPrefix(info.ContainerRuntimeVersion, "containerd://") {
		t.Errorf("node info: kubelet %q, runtime %q: want a v1.37.2 kubelet on containerd", info.KubeletVersion, info.ContainerRuntimeVersion)
	}
	if want := "groundcloud://lab/" + name; n.Spec.ProviderID != want {
		t.Errorf("providerID %q, want %q", n.Spec.ProviderID, want)
	}
	for label, want := range map[string]string{
		corev1.LabelTopologyZone:       "rack-1",
		corev1.LabelTopologyRegion:     "lab",
		corev1.LabelInstanceTypeStable: "netns",
	} {
		if got := n.Labels[label]; got != want {
			t.Errorf("label %s=%q, want %q", label, got, want)
		}
	}
	for _, taint := range n.Spec.Taints {
		if taint.Key == cloudapi.TaintExternalCloudProvider {
			t.Errorf("still tainted %s", taint.Key)
		}
	}
	h := c.Node(name).Host
	var addrs []string
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			addrs = append(addrs, a.Address)
		}
	}
	if !slices.Contains(addrs, h.Addr4.String()) {
		t.Errorf("InternalIPs %v lack the node's address %s", addrs, h.Addr4)
	}
	if len(n.Spec.PodCIDRs) == 0 {
		t.Error("no pod CIDRs: node-ipam did not run")
	}
}

// checkKubernetesService: every node reaches the apiserver through the
// kubernetes Service's cluster IP (kube-proxy's DNAT to its endpoint), as
// Pods do, also after the full resyncs kube-proxy makes when our
// controller manager labels the Nodes with their zone.
func checkKubernetesService(t *testing.T, c *realcluster.Cluster) {
	svc, err := c.Client.CoreV1().Services(metav1.NamespaceDefault).Get(t.Context(), "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	addr := netip.AddrPortFrom(netip.MustParseAddr(svc.Spec.ClusterIP), 443)
	for _, n := range c.Nodes {
		for i := range 3 {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			conn, err := n.Host.DialTCP(ctx, addr)
			cancel()
			if err != nil {
				t.Errorf("%s, attempt %d: %v", n.Name, i+1, err)
				continue
			}
			conn.Close()
		}
	}
}

// checkLoadBalancer creates a Deployment and a LoadBalancer Service as a
// user does and sends requests from a client host through the address:
// Pods of the Deployment answer, on both workers.
func checkLoadBalancer(t *testing.T, c *realcluster.Cluster) {
	ctx := t.Context()
	const ns, name = "default", "echo"
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, c.EchoDeployment(ns, name, 2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().Services(ns).Create(ctx, realcluster.LoadBalancerService(ns, name), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitDeploymentReady(ctx, ns, name); err != nil {
		t.Fatal(err)
	}
	vip, err := c.WaitLoadBalancerIP(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	client := c.Clients["client"].HTTPClient()
	client.Timeout = 2 * time.Second
	url := fmt.Sprintf("http://%s/", netip.AddrPortFrom(vip, 80))
	answers := map[string]int{}
	var last error
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		resp, err := client.Get(url)
		if err != nil {
			last = err
			return false, nil
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		said, err := echo.Parse(string(body))
		if err != nil || !strings.HasPrefix(said.Pod, name+"-") {
			last = fmt.Errorf("unexpected answer %q", body)
			return false, nil
		}
		answers[said.Node]++
		return len(answers) == 2 && total(answers) >= 20, nil
	})
	if err != nil {
		t.Fatalf("through %s: answers by node %v; last: %v (%v)", url, answers, last, err)
	}
	t.Logf("through %s: answers by node %v", url, answers)
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

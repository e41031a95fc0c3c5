package clustertest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/annotation"
	"github.com/groundcloud/groundcloud/internal/lbapi"
	"github.com/groundcloud/groundcloud/test/framework/netlab"
	"github.com/groundcloud/groundcloud/test/framework/realcluster"
)

// checkPassthrough runs passthrough forwarding (the pool's default) on
// the cluster of TestCluster, whose two load-balancer hosts are also Nodes
// with Pods: real kube-proxy on every node serves the addresses as ipMode
// VIP.
func checkPassthrough(t *testing.T, c *realcluster.Cluster) {
	const ns = "default"
	// Three replicas over four nodes (a soft spread): Local Services then
	// have nodes with and without an endpoint.
	for _, name := range []string{"local", "spread"} {
		d := c.EchoDeployment(ns, name, 3)
		d.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
		}}
		if _, err := c.Client.AppsV1().Deployments(ns).Create(t.Context(), d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	local := passthroughService(ns, "local", corev1.ServiceExternalTrafficPolicyLocal)
	spread := passthroughService(ns, "spread", corev1.ServiceExternalTrafficPolicyCluster)
	for _, s := range []*corev1.Service{local, spread} {
		if _, err := c.Client.CoreV1().Services(ns).Create(t.Context(), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"local", "spread"} {
		if err := c.WaitDeploymentReady(t.Context(), ns, name); err != nil {
			t.Fatal(err)
		}
	}
	client := c.Clients["client"]
	vips := map[string][]netip.Addr{}
	for _, name := range []string{"local", "spread"} {
		vips[name] = waitIngress(t, c, ns, name)
	}
	t.Logf("addresses: %v", vips)

	t.Run("status says ipMode VIP and the object Passthrough", func(t *testing.T) {
		for _, name := range []string{"local", "spread"} {
			s, err := c.Client.CoreV1().Services(ns).Get(t.Context(), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range s.Status.LoadBalancer.Ingress {
				if in.IPMode == nil || *in.IPMode != corev1.LoadBalancerIPModeVIP {
					t.Errorf("%s: ingress %s ipMode %v, want VIP", name, in.IP, in.IPMode)
				}
			}
			lb, err := lbObjects(t, c).Get(t.Context(), ns, name)
			if err != nil {
				t.Fatal(err)
			}
			if lb.Spec.Forwarding != v1alpha1.ForwardingPassthrough {
				t.Errorf("%s: LoadBalancer forwarding %q, want Passthrough", name, lb.Spec.Forwarding)
			}
		}
	})

	for _, vip := range vips["local"] {
		src := client.Addr4
		if vip.Is6() {
			src = client.Addr6
		}
		t.Run("Local over "+family(vip)+": every connection reaches a Pod that sees the client's own address", func(t *testing.T) {
			url := fmt.Sprintf("http://%s/", netip.AddrPortFrom(vip, 80))
			waitServing(t, lbClient(client), url)
			// A node whose Pod became ready lately passes its health check
			// a probe later, and takes its buckets then: the connections in
			// flight in them at that moment go to it mid-flow (passthrough
			// keeps no state per flow). Wait until every node with a ready
			// Pod answers, as the hosts then no longer change their buckets.
			waitAnsweredByPodNodes(t, c, ns, "local", lbClient(client), url)
			byNode := map[string]int{}
			for i := range 40 {
				a, err := get(t.Context(), lbClient(client), url)
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				if a.seen != src {
					t.Errorf("%s on %s saw the client as %s, want %s", a.pod, a.node, a.seen, src)
				}
				byNode[a.node]++
			}
			t.Logf("answers by node: %v", byNode)
		})
	}

	for _, vip := range vips["spread"] {
		t.Run("Cluster over "+family(vip)+": TCP and UDP, every connection answered", func(t *testing.T) {
			url := fmt.Sprintf("http://%s/", netip.AddrPortFrom(vip, 80))
			waitServing(t, lbClient(client), url)
			byNode := map[string]int{}
			for i := range 40 {
				a, err := get(t.Context(), lbClient(client), url)
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				byNode[a.node]++
			}
			t.Logf("TCP answers by node: %v", byNode)
			for i := range 20 {
				ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
				out, err := client.UDPExchange(ctx, netip.AddrPortFrom(vip, 53), []byte("hi"))
				cancel()
				if err != nil {
					t.Fatalf("UDP datagram %d: %v", i, err)
				}
				if _, err := parseAnswer(string(out)); err != nil {
					t.Fatal(err)
				}
			}
		})
	}

	t.Run("replies do not cross the load-balancer hosts", func(t *testing.T) {
		var lbs []*netlab.Host
		for _, n := range c.Nodes {
			if n.LoadBalancer {
				lbs = append(lbs, n.Host)
				runNft(t, n.Host, countTable(vips["spread"]))
				t.Cleanup(func() {
					_ = n.Host.Command(context.Background(), "nft", "delete", "table", "netdev", "passthrough-count").Run()
				})
			}
		}
		for _, vip := range vips["spread"] {
			for range 20 {
				if _, err := get(t.Context(), lbClient(client), fmt.Sprintf("http://%s/", netip.AddrPortFrom(vip, 80))); err != nil {
					t.Fatal(err)
				}
			}
		}
		to := 0
		for _, h := range lbs {
			n := countersIn(t, h)
			t.Logf("%s: packets to the addresses %d, from them %d", h.Name, n[0], n[1])
			to += n[0]
			if n[1] != 0 {
				t.Errorf("%d reply packets from the addresses reached %s", n[1], h.Name)
			}
		}
		if to == 0 {
			t.Error("no request packet reached a load-balancer host")
		}
	})

	t.Run("a Service annotated for proxy forwarding is proxied beside them", func(t *testing.T) {
		s := passthroughService(ns, "proxied", corev1.ServiceExternalTrafficPolicyLocal)
		s.Spec.Selector = map[string]string{"app": "local"}
		s.Annotations = map[string]string{annotation.Forwarding: "proxy"}
		if _, err := c.Client.CoreV1().Services(ns).Create(t.Context(), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		addrs := waitIngress(t, c, ns, "proxied")
		got, err := c.Client.CoreV1().Services(ns).Get(t.Context(), "proxied", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range got.Status.LoadBalancer.Ingress {
			if in.IPMode == nil || *in.IPMode != corev1.LoadBalancerIPModeProxy {
				t.Errorf("ingress %s ipMode %v, want Proxy", in.IP, in.IPMode)
			}
		}
		for _, vip := range addrs {
			url := fmt.Sprintf("http://%s/", netip.AddrPortFrom(vip, 80))
			waitServing(t, lbClient(client), url)
			for i := range 20 {
				a, err := get(t.Context(), lbClient(client), url)
				if err != nil {
					t.Fatalf("request %d to %s: %v", i, vip, err)
				}
				if a.seen != vip {
					t.Errorf("%s on %s saw the client as %s, want the address %s (proxy forwarding SNATs to it)", a.pod, a.node, a.seen, vip)
				}
			}
		}
	})

	t.Run("a Pod reaches the address", func(t *testing.T) {
		// A Pod of spread on a worker (the scheduler's spreading is a
		// preference).
		var pod *corev1.Pod
		var id, node string
		var err error
		for _, node = range []string{"node-2", "node-1"} {
			if pod, id, err = c.PodContainer(t.Context(), ns, "app=spread", node); err == nil {
				break
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		pid, err := c.Node(node).ContainerPID(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, vip := range vips["spread"] {
			line, err := dialFromPid(pid, netip.AddrPortFrom(vip, 80))
			if err != nil {
				t.Fatalf("from Pod %s to %s: %v", pod.Name, vip, err)
			}
			if _, err := parseAnswer(line); err != nil {
				t.Error(err)
			}
		}
	})

	t.Run("a long-lived connection survives the holder's agent killed and its link down, with nothing in conntrack", func(t *testing.T) {
		vip := vips["spread"][0]
		conn, first := keepAliveOnWorker(t, c, client, vip)
		defer conn.Close()
		local := netip.MustParseAddrPort(conn.conn.LocalAddr().String())
		t.Logf("connection %s -> %s served by %s on %s", local, vip, first.pod, first.node)
		same := func(what string) {
			t.Helper()
			for i := range 3 {
				a, err := conn.getWithin(20 * time.Second)
				if err != nil {
					t.Fatalf("%s: request %d on the connection: %v", what, i, err)
				}
				if a.pod != first.pod {
					t.Errorf("%s: request %d answered by %s, the connection was with %s", what, i, a.pod, first.pod)
				}
			}
			for _, n := range c.Nodes {
				if !n.LoadBalancer {
					continue
				}
				if k := conntrackEntries(t, n.Host, local, vip); k != 0 {
					t.Errorf("%s: %d conntrack entries for the connection on %s", what, k, n.Name)
				}
			}
		}

		holder := holderOtherThan(t, dynOf(t, c), "spread", netip.Addr{}, "")
		killAgent(t, c, holder)
		same("after a kill of " + holder + "'s agent")

		holder = holderOtherThan(t, dynOf(t, c), "spread", netip.Addr{}, "")
		lb := c.Node(holder)
		if err := lb.SetLink(false); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = lb.SetLink(true) })
		next := holderOtherThan(t, dynOf(t, c), "spread", netip.Addr{}, holder)
		t.Logf("%s's link is down; %s holds %s", holder, next, vip)
		same("after " + holder + "'s link went down")
	})
}

func lbObjects(t *testing.T, c *realcluster.Cluster) *lbapi.Client {
	t.Helper()
	return lbapi.NewClient(dynOf(t, c))
}

func dynOf(t *testing.T, c *realcluster.Cluster) dynamic.Interface {
	t.Helper()
	dyn, err := dynamic.NewForConfig(c.CP.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	return dyn
}

func family(a netip.Addr) string {
	if a.Is6() {
		return "IPv6"
	}
	return "IPv4"
}

// passthroughService serves the Pods labelled app=name on TCP 80 and UDP
// 53, dual-stack, from the pool's default (passthrough) forwarding.
func passthroughService(ns, name string, policy corev1.ServiceExternalTrafficPolicy) *corev1.Service {
	s := realcluster.LoadBalancerService(ns, name)
	s.Spec.ExternalTrafficPolicy = policy
	s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
	s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(realcluster.EchoUDPPort)})
	return s
}

// waitIngress waits for both addresses of a Service.
func waitIngress(t *testing.T, c *realcluster.Cluster, ns, name string) []netip.Addr {
	t.Helper()
	var out []netip.Addr
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		s, err := c.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || len(s.Status.LoadBalancer.Ingress) < 2 {
			return false, nil
		}
		out = nil
		for _, in := range s.Status.LoadBalancer.Ingress {
			out = append(out, netip.MustParseAddr(in.IP))
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("Service %s got no IPv4 and IPv6 addresses: %v", name, err)
	}
	return out
}

// keepAliveOnWorker opens connections to vip:80 until one is received by
// a worker and served by a Pod on a worker (not by a load-balancer host,
// whose failure would end the flows its node carries), and returns it with
// its first answer.
func keepAliveOnWorker(t *testing.T, c *realcluster.Cluster, h *netlab.Host, vip netip.Addr) (*keepAlive, answer) {
	t.Helper()
	r := newReceivers(t, c)
	for range 30 {
		k, a, err := dialKeepAlive(t.Context(), h, netip.AddrPortFrom(vip, 80))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(a.node, "node-") && strings.HasPrefix(r.of(a.seen), "node-") {
			return k, a
		}
		k.Close()
	}
	t.Fatal("30 connections all involved a load-balancer host")
	return nil, answer{}
}

// killAgent kills the agent's container on node as a crash would and
// waits until its kubelet has restarted it and it is ready.
func killAgent(t *testing.T, c *realcluster.Cluster, node string) {
	t.Helper()
	crashAgent(t, c, node)()
}

// crashAgent kills the agent's container on node as a crash would, and
// returns a function that waits until it is restarted and ready.
func crashAgent(t *testing.T, c *realcluster.Cluster, node string) (restarted func()) {
	t.Helper()
	pod, id, err := c.AgentContainer(t.Context(), node)
	if err != nil {
		t.Fatal(err)
	}
	restarts := pod.Status.ContainerStatuses[0].RestartCount
	if err := c.Node(node).KillContainer(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
			p, err := c.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil || len(p.Status.ContainerStatuses) == 0 {
				return false, nil
			}
			st := p.Status.ContainerStatuses[0]
			return st.RestartCount > restarts && st.Ready, nil
		})
		if err != nil {
			t.Fatalf("the agent on %s was not restarted: %v", node, err)
		}
	}
}

// countTable counts, at the ingress of a host's eth0, packets to the
// addresses and packets from them.
func countTable(vips []netip.Addr) string {
	var to, from []string
	for _, v := range vips {
		ip := "ip"
		if v.Is6() {
			ip = "ip6"
		}
		to = append(to, fmt.Sprintf("  %s daddr %s counter", ip, v))
		// Only frames addressed to this host: a bridge floods a reply
		// whose destination it has not learnt (or has forgotten) to every
		// port, which is not the reply crossing this host.
		from = append(from, fmt.Sprintf("  meta pkttype host %s saddr %s counter", ip, v))
	}
	return "table netdev passthrough-count {\n chain in {\n  type filter hook ingress device \"eth0\" priority -1000; policy accept;\n" +
		strings.Join(to, "\n") + "\n" + strings.Join(from, "\n") + "\n }\n}\n"
}

func runNft(t *testing.T, h *netlab.Host, ruleset string) {
	t.Helper()
	cmd := h.Command(t.Context(), "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(ruleset)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft in %s: %v: %s", h.Name, err, out)
	}
}

// countersIn sums the "to" counters and the "from" counters of
// countTable.
func countersIn(t *testing.T, h *netlab.Host) [2]int {
	t.Helper()
	out, err := h.Command(t.Context(), "nft", "list", "table", "netdev", "passthrough-count").Output()
	if err != nil {
		t.Fatal(err)
	}
	var n [2]int
	for _, m := range regexp.MustCompile(`(daddr|saddr) \S+ counter packets (\d+)`).FindAllStringSubmatch(string(out), -1) {
		v, _ := strconv.Atoi(m[2])
		if m[1] == "daddr" {
			n[0] += v
		} else {
			n[1] += v
		}
	}
	return n
}

// conntrackEntries counts the entries of the flow src -> vip in h.
func conntrackEntries(t *testing.T, h *netlab.Host, src netip.AddrPort, vip netip.Addr) int {
	t.Helper()
	fam := netlink.InetFamily(unix.AF_INET)
	if vip.Is6() {
		fam = unix.AF_INET6
	}
	n := 0
	err := h.Do(func() error {
		flows, err := netlink.ConntrackTableList(netlink.ConntrackTable, fam)
		for _, f := range flows {
			s, _ := netip.AddrFromSlice(f.Forward.SrcIP)
			d, _ := netip.AddrFromSlice(f.Forward.DstIP)
			if s.Unmap() == src.Addr() && f.Forward.SrcPort == src.Port() && d.Unmap() == vip {
				n++
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// dialFromPid connects from the network namespace of process pid (a
// container) to addr and returns the first line it answers to a GET.
func dialFromPid(pid int, addr netip.AddrPort) (string, error) {
	type result struct {
		line string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		// The thread is never unlocked: it ends with the goroutine, so no
		// other goroutine runs in the Pod's namespace.
		runtime.LockOSThread()
		ns, err := netns.GetFromPid(pid)
		if err != nil {
			done <- result{err: err}
			return
		}
		defer ns.Close()
		if err := netns.Set(ns); err != nil {
			done <- result{err: err}
			return
		}
		conn, err := net.DialTimeout("tcp", addr.String(), 5*time.Second)
		if err != nil {
			done <- result{err: err}
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: echo\r\nConnection: close\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			done <- result{err: err}
			return
		}
		defer resp.Body.Close()
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		done <- result{line, err}
	}()
	r := <-done
	return r.line, r.err
}

// waitAnsweredByPodNodes waits until connections through url have been
// answered by every node that runs a ready Pod of app in ns.
func waitAnsweredByPodNodes(t *testing.T, c *realcluster.Cluster, ns, app string, client *http.Client, url string) {
	t.Helper()
	want := map[string]bool{}
	seen := map[string]bool{}
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if len(want) == 0 {
			pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
			if err != nil {
				return false, nil
			}
			for _, p := range pods.Items {
				for _, cond := range p.Status.Conditions {
					if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue && p.Spec.NodeName != "" {
						want[p.Spec.NodeName] = true
					}
				}
			}
		}
		if a, err := get(ctx, client, url); err == nil {
			seen[a.node] = true
		}
		for n := range want {
			if !seen[n] {
				return false, nil
			}
		}
		return len(want) > 0, nil
	})
	if err != nil {
		t.Fatalf("%s: answered by %v, want every node with a ready Pod of %s: %v", url, seen, app, want)
	}
}

package clustertest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/groundcloud/groundcloud/internal/annotation"
	"github.com/groundcloud/groundcloud/internal/backends"
	"github.com/groundcloud/groundcloud/internal/lbapi"
	"github.com/groundcloud/groundcloud/test/framework/netlab"
	"github.com/groundcloud/groundcloud/test/framework/realcluster"
	"github.com/groundcloud/groundcloud/test/images/echo"
)

// The load-balancer scenarios on the real path: a client host → the VIP on
// a load-balancer host (the agent's nftables) → a node's NodePort →
// kube-proxy → a Pod of a Deployment. The load-balancer hosts are Nodes
// with kube-proxy and Pods of their own, as docs/install.md sets them up.
//
// Which node a connection reached shows in the source address the Pod saw:
// with externalTrafficPolicy Cluster kube-proxy masquerades it to the
// receiving node's address on the way out: its lab address towards a Pod
// on another node, its pod-network gateway towards a Pod of its own.

const echoNS = "default"

// answer is what groundcloud-echo said: "hello from <pod> on <node> (you
// are <addr:port>)".
type answer struct {
	pod, node string
	seen      netip.Addr
}

func parseAnswer(s string) (answer, error) {
	said, err := echo.Parse(s)
	if err != nil {
		return answer{}, err
	}
	return answer{pod: said.Pod, node: said.Node, seen: said.Client.Addr().Unmap()}, nil
}

// get makes one request on a fresh connection.
func get(ctx context.Context, client *http.Client, url string) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return answer{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return answer{}, err
	}
	return answerOf(resp)
}

// answerOf reads the answer in a response's body and closes it.
func answerOf(resp *http.Response) (answer, error) {
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	return parseAnswer(string(body))
}

// receivers maps the addresses a masquerading node gives its connections
// to the node's name.
type receivers struct {
	nodes   map[netip.Addr]string
	podNets map[netip.Prefix]string
}

func newReceivers(t *testing.T, c *realcluster.Cluster) receivers {
	t.Helper()
	r := receivers{nodes: map[netip.Addr]string{}, podNets: map[netip.Prefix]string{}}
	for _, n := range c.Nodes {
		r.nodes[n.Host.Addr4] = n.Name
		r.nodes[n.Host.Addr6] = n.Name
		node, err := c.Client.CoreV1().Nodes().Get(t.Context(), n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range node.Spec.PodCIDRs {
			r.podNets[netip.MustParsePrefix(s)] = n.Name
		}
	}
	return r
}

// of names the node a source address belongs to, or "".
func (r receivers) of(a netip.Addr) string {
	if n, ok := r.nodes[a]; ok {
		return n
	}
	for p, n := range r.podNets {
		if p.Contains(a) {
			return n
		}
	}
	return ""
}

// lbScenario is one Deployment of echo Pods and its LoadBalancer Service.
type lbScenario struct {
	c    *realcluster.Cluster
	name string
	vips []netip.Addr
}

// anyOf in deploy's node selector lists nodes ("node-1,node-2") the Pods
// may run on, one of them each.
const anyOf = "any-of"

// deploy creates a Deployment of replicas echo Pods (on the nodes sel
// picks, if any) and a LoadBalancer Service in front of them, changed by
// mods, and waits for the Pods and an address of each family the Service
// asks for.
func deploy(t *testing.T, c *realcluster.Cluster, name string, replicas int32, sel map[string]string, mods ...func(*corev1.Service)) *lbScenario {
	t.Helper()
	ctx := t.Context()
	createEcho(t, c, name, replicas, sel)
	svc := exposeProxy(t, c, name, mods...)
	if err := c.WaitDeploymentReady(ctx, echoNS, name); err != nil {
		t.Fatal(err)
	}
	want := 1
	if p := svc.Spec.IPFamilyPolicy; p != nil && *p == corev1.IPFamilyPolicyRequireDualStack {
		want = 2
	}
	s := &lbScenario{c: c, name: name}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := c.Client.CoreV1().Services(echoNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil || len(got.Status.LoadBalancer.Ingress) < want {
			return false, nil
		}
		s.vips = nil
		for _, in := range got.Status.LoadBalancer.Ingress {
			s.vips = append(s.vips, netip.MustParseAddr(in.IP))
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("Service %s got no addresses: %v", name, err)
	}
	return s
}

// createEcho creates the echo Deployment name with replicas Pods on the
// nodes sel selects (anyOf: any of a list; none: spread over all), deleted
// when the test ends.
func createEcho(t *testing.T, c *realcluster.Cluster, name string, replicas int32, sel map[string]string) {
	t.Helper()
	d := c.EchoDeployment(echoNS, name, replicas)
	d.Spec.Template.Spec.NodeSelector = sel
	if nodes := sel[anyOf]; nodes != "" {
		delete(sel, anyOf)
		d.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: strings.Split(nodes, ",")}},
			}}},
		}}
	}
	if len(sel) == 0 || d.Spec.Template.Spec.Affinity != nil {
		// Spread over the nodes.
		d.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
		}}
	}
	if _, err := c.Client.AppsV1().Deployments(echoNS).Create(t.Context(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.AppsV1().Deployments(echoNS).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// exposeProxy creates the LoadBalancer Service name (TCP 80 and UDP 53,
// proxy forwarding; passthroughs are in passthrough_test.go) for the echo
// Deployment of that name, changed by mods, deleted when the test ends.
func exposeProxy(t *testing.T, c *realcluster.Cluster, name string, mods ...func(*corev1.Service)) *corev1.Service {
	t.Helper()
	svc := realcluster.LoadBalancerService(echoNS, name)
	svc.Annotations = map[string]string{annotation.Forwarding: "proxy"}
	svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "udp", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(realcluster.EchoUDPPort)})
	for _, m := range mods {
		m(svc)
	}
	if _, err := c.Client.CoreV1().Services(echoNS).Create(t.Context(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.CoreV1().Services(echoNS).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return svc
}

// vip returns the Service's address of a family.
func (s *lbScenario) vip(t *testing.T, v6 bool) netip.Addr {
	t.Helper()
	for _, a := range s.vips {
		if a.Is6() == v6 {
			return a
		}
	}
	t.Fatalf("%s has no address of that family: %v", s.name, s.vips)
	return netip.Addr{}
}

func url(vip netip.Addr) string { return fmt.Sprintf("http://%s/", netip.AddrPortFrom(vip, 80)) }

// holder is the load-balancer host holding a Service's address, as its
// LoadBalancer's status says.
func holder(t *testing.T, dyn dynamic.Interface, name string, vip netip.Addr) string {
	t.Helper()
	return holderOtherThan(t, dyn, name, vip, "")
}

// holderOtherThan waits until the status names a host other than not as
// the holder of vip (of the first address of the spec when vip is the
// zero Addr), and returns it.
func holderOtherThan(t *testing.T, dyn dynamic.Interface, name string, vip netip.Addr, not string) string {
	t.Helper()
	var host string
	client := lbapi.NewClient(dyn)
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		lb, err := client.Get(ctx, echoNS, name)
		if err != nil || len(lb.Spec.Addresses) == 0 {
			return false, nil
		}
		want := vip.String()
		if !vip.IsValid() {
			want = lb.Spec.Addresses[0]
		}
		for _, a := range lb.Status.Addresses {
			if a.Address == want && a.Host != "" && a.Host != not {
				host = a.Host
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no host other than %q holds %s of %s: %v", not, vip, name, err)
	}
	return host
}

// waitServing waits until ten requests in a row through url are answered:
// the agents program a new Service, and every node's kube-proxy its
// NodePort and endpoints (at most once a second), a moment after the
// address is assigned; until then a connection may be refused.
func waitServing(t *testing.T, client *http.Client, url string) {
	t.Helper()
	var last error
	inRow := 0
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if _, last = get(ctx, client, url); last != nil {
			inRow = 0
			return false, nil
		}
		inRow++
		return inRow == 10, nil
	})
	if err != nil {
		t.Fatalf("%s not answered ten times in a row: last error %v (%v)", url, last, err)
	}
}

// survey makes n connections through url, each a fresh one; every one must
// be answered. It returns the answers per receiving node.
func survey(t *testing.T, client *http.Client, r receivers, url string, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	var failed []string
	for i := range n {
		a, err := get(t.Context(), client, url)
		if err != nil {
			failed = append(failed, fmt.Sprintf("#%d: %v", i, err))
			continue
		}
		got[r.of(a.seen)]++
	}
	if len(failed) > 0 {
		t.Errorf("%d of %d connections through %s failed (answered by node: %v); first: %s", len(failed), n, url, got, failed[0])
	}
	return got
}

func lbClient(h *netlab.Host) *http.Client {
	c := h.HTTPClient()
	c.Timeout = 3 * time.Second
	return c
}

// checkHostAsNode: the load-balancer hosts are Nodes with kube-proxy and
// Pods. Every connection through the VIP is answered, over IPv4 and IPv6:
// the holder sends none of them to its own node, whose NodePort it cannot
// reach through its own DNAT (netfilter maps a connection's destination
// once per hook, so kube-proxy's NodePort rule would never see it), nor
// to another load-balancer host's, so that every host fills the buckets
// alike (dataplane.ForNewFlows); every other node receives its share.
func checkHostAsNode(t *testing.T, c *realcluster.Cluster, dyn dynamic.Interface, s *lbScenario) {
	r := newReceivers(t, c)
	client := lbClient(c.Clients["client"])
	for _, v6 := range []bool{false, true} {
		vip := s.vip(t, v6)
		waitServing(t, client, url(vip))
		own := holder(t, dyn, s.name, vip)
		got := survey(t, client, r, url(vip), 96)
		t.Logf("through %s held by %s: connections by receiving node %v", vip, own, got)
		if got[own] > 0 {
			t.Errorf("%d connections through %s went to its holder's own node %s", got[own], vip, own)
		}
		for _, n := range c.Nodes {
			switch {
			case n.LoadBalancer && got[n.Name] > 0:
				t.Errorf("%d connections through %s went to load-balancer host %s's node", got[n.Name], vip, n.Name)
			case !n.LoadBalancer && got[n.Name] == 0:
				t.Errorf("node %s received none of the connections through %s", n.Name, vip)
			}
		}
		if got[""] > 0 {
			t.Errorf("%d answers came through no known node", got[""])
		}
	}
}

// deployWeb is the scenario most checks share: four echo Pods, spread by
// the scheduler, behind a dual-stack Service with TCP and UDP ports.
func deployWeb(t *testing.T, c *realcluster.Cluster) *lbScenario {
	return deploy(t, c, "web", 4, nil, func(svc *corev1.Service) {
		svc.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
	})
}

// checkUDP: datagrams through the VIP are answered by the Pods.
func checkUDP(t *testing.T, c *realcluster.Cluster, s *lbScenario) {
	h := c.Clients["client"]
	for _, v6 := range []bool{false, true} {
		addr := netip.AddrPortFrom(s.vip(t, v6), 53)
		answered := 0
		var last error
		for i := range 20 {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			b, err := h.UDPExchange(ctx, addr, []byte(fmt.Sprintf("datagram %d", i)))
			cancel()
			if err != nil {
				last = err
				continue
			}
			if _, err := parseAnswer(string(b)); err != nil {
				last = err
				continue
			}
			answered++
		}
		// A datagram may be lost; most must not be.
		if answered < 18 {
			t.Errorf("UDP through %s: %d of 20 datagrams answered; last error: %v", addr, answered, last)
		}
	}
}

// checkLocalPolicy: with externalTrafficPolicy Local, the nodes that get
// connections are those whose healthCheckNodePort kube-proxy answers with
// a local endpoint: where the Pod runs. Moving the Pod moves the traffic.
func checkLocalPolicy(t *testing.T, c *realcluster.Cluster) *lbScenario {
	ctx := t.Context()
	on := func(node string) map[string]string { return map[string]string{corev1.LabelHostname: node} }
	s := deploy(t, c, "local", 1, on("node-2"), func(svc *corev1.Service) {
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	})
	client := lbClient(c.Clients["client"])
	waitServing(t, client, url(s.vip(t, false)))
	expectOnly(t, client, url(s.vip(t, false)), "node-2")

	moveTo(ctx, t, c, s.name, "node-1")
	expectOnly(t, client, url(s.vip(t, false)), "node-1")
	return s
}

// expectOnly waits until 20 connections in a row through u are all
// answered by a Pod on node.
func expectOnly(t *testing.T, client *http.Client, u, node string) {
	t.Helper()
	expectOnlyWithin(t, client, u, node, 2*time.Minute)
}

// expectOnlyWithin is expectOnly with a deadline of d.
func expectOnlyWithin(t *testing.T, client *http.Client, u, node string, d time.Duration) {
	t.Helper()
	var got map[string]int
	err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, d, true, func(ctx context.Context) (bool, error) {
		got = map[string]int{}
		for range 20 {
			a, err := get(ctx, client, u)
			if err != nil {
				got["error"]++
				continue
			}
			got[a.node]++
		}
		return got[node] == 20, nil
	})
	if err != nil {
		t.Fatalf("answers through %s by node %v, want all 20 from %s", u, got, node)
	}
}

// checkNodeJoins: a worker whose kubelet starts while the cluster runs
// registers, is initialised by groundcloud's controller manager and
// becomes a backend of every Service: a Local Service whose only Pod runs
// on it is answered from it alone (its kube-proxy's healthCheckNodePort
// reports the Pod), and connections to a Cluster Service reach it as
// well, none of them failing from before the join until then (one every
// 20 ms). The Local Service is its own: one deployed by an earlier subtest
// is gone with that subtest (deploy's cleanup), and polling its old
// address worked only while a later Service happened to get the same one.
func checkNodeJoins(t *testing.T, c *realcluster.Cluster, web *lbScenario, node string) {
	ctx := t.Context()
	const name = "joining"
	t.Cleanup(func() {
		if t.Failed() {
			diagnose(t, c, node, name)
		}
	})
	// Connections through web's address from before the join until the
	// new node has taken some: none may fail (see below).
	client := lbClient(c.Clients["client"])
	waitServing(t, client, url(web.vip(t, false))) // at once, but in a run of this subtest alone
	during := keepSurveying(t, client, url(web.vip(t, false)))
	if err := c.Join(ctx, node); err != nil {
		t.Fatal(err)
	}
	checkNodeInitialised(t, c, node)
	s := deploy(t, c, name, 1, map[string]string{corev1.LabelHostname: node}, func(svc *corev1.Service) {
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	})
	// A fresh node's kube-proxy reports the Pod on its healthCheckNodePort
	// once it has the Pod's endpoints.
	expectOnlyWithin(t, client, url(s.vip(t, false)), node, 4*time.Minute)

	// The agents send the new node connections once groundcloud-router on
	// it reports the routes to the other nodes' Pods programmed (its
	// Node's groundcloud.io/PodRoutes) and its kube-proxy answers
	// /healthz: every connection is answered from the join on. Before the
	// agents waited for the routes, 2 of 32 connections here once failed
	// with "network is unreachable" (checkRoutesMissing shows the rule).
	r := newReceivers(t, c)
	var got map[string]int
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		got = survey(t, client, r, url(web.vip(t, false)), 32)
		return got[node] > 0, nil
	})
	if err != nil {
		t.Fatalf("connections through %s received by node %v, none by the new %s", url(web.vip(t, false)), got, node)
	}
	t.Logf("connections through %s received by node: %v", url(web.vip(t, false)), got)
	if got := during(); len(got.failed) > 0 {
		t.Errorf("%d of %d connections through %s failed while %s joined; first: %s", len(got.failed), got.total(), url(web.vip(t, false)), node, got.failed[0])
	} else {
		t.Logf("%d connections through %s while %s joined, none failed", got.total(), url(web.vip(t, false)), node)
	}
}

// surveyed is what keepSurveying saw: answers by the node that answered
// (its Pod's), and each failure with its time.
type surveyed struct {
	answers map[string]int
	failed  []string
}

func (s surveyed) total() int {
	n := len(s.failed)
	for _, k := range s.answers {
		n += k
	}
	return n
}

// keepSurveying opens a connection through u every 20 ms until the
// returned function is called, which returns what they got.
func keepSurveying(t *testing.T, client *http.Client, u string) func() surveyed {
	t.Helper()
	got := surveyed{answers: map[string]int{}}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if a, err := get(t.Context(), client, u); err != nil {
				got.failed = append(got.failed, fmt.Sprintf("%s: %v", time.Now().Format("15:04:05.000"), err))
			} else {
				got.answers[a.node]++
			}
		}
	}()
	var once sync.Once
	finish := func() {
		once.Do(func() {
			close(stop)
			<-done
		})
	}
	t.Cleanup(finish)
	return func() surveyed {
		finish()
		return got
	}
}

// checkNodeDeleted: a Node deleted from the cluster while its machine runs
// on (kubelet, kube-proxy and rules stay; the kubelet registers no new
// Node) stops being a backend: every connection through the address is
// answered, none through it. It must have been one before. This is what a
// user sees, whichever component drains the node first; the agents' own
// handling of a deleted Node is checked where a simulated node's health
// stays good after its Node is gone (test/e2e
// TestNodeChangeWritesNoLoadBalancer).
func checkNodeDeleted(t *testing.T, c *realcluster.Cluster, s *lbScenario, node string) {
	r := newReceivers(t, c)
	client := lbClient(c.Clients["client"])
	u := url(s.vip(t, false))
	untilSpread(t, client, r, u, node+" a backend", func(got map[string]int) bool { return got[node] > 0 && got["error"] == 0 })
	if err := c.Client.CoreV1().Nodes().Delete(t.Context(), node, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	untilSpread(t, client, r, u, node+" deleted", func(got map[string]int) bool { return got[node] == 0 && got["error"] == 0 })
}

// checkDrainedNode: a node that kube-proxy reports as not eligible (the
// taint the cluster autoscaler sets before it removes a node makes its
// /healthz answer 503) gets no new connections; without the taint it gets
// them again.
func checkDrainedNode(t *testing.T, c *realcluster.Cluster, s *lbScenario) {
	ctx := t.Context()
	const node = "node-1"
	taint := corev1.Taint{Key: "ToBeDeletedByClusterAutoscaler", Value: "1", Effect: corev1.TaintEffectNoSchedule}
	setTaint := func(ctx context.Context, on bool) {
		t.Helper()
		// The kubelet and the router write the Node's status meanwhile.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			n, err := c.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return err
			}
			n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(x corev1.Taint) bool { return x.Key == taint.Key })
			if on {
				n.Spec.Taints = append(n.Spec.Taints, taint)
			}
			_, err = c.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	r := newReceivers(t, c)
	client := lbClient(c.Clients["client"])
	u := url(s.vip(t, false))
	until := func(what string, cond func(map[string]int) bool) { untilSpread(t, client, r, u, what, cond) }
	setTaint(ctx, true)
	t.Cleanup(func() { setTaint(context.Background(), false) })
	until(node+" drained", func(got map[string]int) bool { return got[node] == 0 && got["error"] == 0 })
	setTaint(ctx, false)
	until(node+" back", func(got map[string]int) bool { return got[node] > 0 && got["error"] == 0 })
}

// checkSourceRanges: a Service with loadBalancerSourceRanges answers a
// client inside them only.
func checkSourceRanges(t *testing.T, c *realcluster.Cluster) {
	inside, outsider := c.Clients["client"], c.Clients["outsider"]
	s := deploy(t, c, "ranged", 2, nil, func(svc *corev1.Service) {
		svc.Spec.LoadBalancerSourceRanges = []string{netip.PrefixFrom(inside.Addr4, 32).String()}
	})
	u := url(s.vip(t, false))
	waitServing(t, lbClient(inside), u)
	// Dropped: each attempt times out, after a second.
	out := lbClient(outsider)
	out.Timeout = time.Second
	for i := range 3 {
		if a, err := get(t.Context(), out, u); err == nil {
			t.Fatalf("attempt %d: a client outside the source ranges was answered: %+v", i, a)
		}
	}
}

// checkFailover: the holder's agent is killed (its container, as a
// crash): its kubelet restarts it, and new connections through the address
// are answered. What a long-lived connection through it does is logged, not
// asserted: with proxy forwarding one was reset once in five runs on this
// test bed, not yet explained (the link-down check asserts survival, and so
// does passthrough's after an agent kill).
func checkFailover(t *testing.T, c *realcluster.Cluster, dyn dynamic.Interface, s *lbScenario) {
	ctx := t.Context()
	vip := s.vip(t, false)
	own := settledHolder(t, c, dyn, s.name, vip)
	r := newReceivers(t, c)
	h := c.Clients["client"]
	conn := workerConn(t, h, r, vip, "")
	defer conn.Close()

	pod, id, err := c.AgentContainer(ctx, own)
	if err != nil {
		t.Fatal(err)
	}
	restarts := pod.Status.ContainerStatuses[0].RestartCount
	if err := c.Node(own).KillContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed the agent's container on %s", own)
	// The connection carries requests while the address moves and the
	// kubelet restarts the agent.
	deadline := time.Now().Add(15 * time.Second)
	for n := 0; time.Now().Before(deadline); n++ {
		if _, err := conn.get(); err != nil {
			t.Logf("request %d on the long-lived connection after the kill: %v", n, err)
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) == 0 {
			return false, nil
		}
		st := p.Status.ContainerStatuses[0]
		return st.RestartCount > restarts && st.Ready, nil
	})
	if err != nil {
		t.Fatalf("the agent's container was not restarted and ready: %v", err)
	}
	if _, err := conn.get(); err != nil {
		t.Logf("the long-lived connection after the agent's restart: %v", err)
	}
	survey(t, lbClient(h), r, url(vip), 32)
}

// keepAlive is one HTTP/1.1 connection used for several requests.
type keepAlive struct {
	conn net.Conn
	rd   *bufio.Reader
}

func dialKeepAlive(ctx context.Context, h *netlab.Host, addr netip.AddrPort) (*keepAlive, answer, error) {
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := h.DialTCP(dctx, addr)
	if err != nil {
		return nil, answer{}, err
	}
	k := &keepAlive{conn: conn, rd: bufio.NewReader(conn)}
	a, err := k.get()
	if err != nil {
		conn.Close()
		return nil, answer{}, err
	}
	return k, a, nil
}

func (k *keepAlive) get() (answer, error) { return k.getWithin(3 * time.Second) }

// getWithin makes one request on the connection, answered within d.
func (k *keepAlive) getWithin(d time.Duration) (answer, error) {
	_ = k.conn.SetDeadline(time.Now().Add(d))
	if _, err := io.WriteString(k.conn, "GET / HTTP/1.1\r\nHost: echo\r\n\r\n"); err != nil {
		return answer{}, err
	}
	resp, err := http.ReadResponse(k.rd, nil)
	if err != nil {
		return answer{}, err
	}
	return answerOf(resp)
}

func (k *keepAlive) Close() { _ = k.conn.Close() }

// checkPodRoutes: every node reaches a Pod on every other node by its
// address on node-ipam's pod network, over the routes groundcloud-router
// programs from the Route objects.
func checkPodRoutes(t *testing.T, c *realcluster.Cluster, s *lbScenario) {
	pods, err := c.Client.CoreV1().Pods(echoNS).List(t.Context(), metav1.ListOptions{LabelSelector: "app=" + s.name})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		for _, ip := range p.Status.PodIPs {
			addr := netip.MustParseAddr(ip.IP)
			for _, n := range c.Nodes {
				if n.Name == p.Spec.NodeName {
					continue
				}
				a, err := get(t.Context(), lbClient(n.Host), fmt.Sprintf("http://%s/", netip.AddrPortFrom(addr, realcluster.EchoHTTPPort)))
				if err != nil {
					t.Errorf("%s → pod %s on %s at %s: %v", n.Name, p.Name, p.Spec.NodeName, addr, err)
					continue
				}
				if a.pod != p.Name {
					t.Errorf("%s → %s answered by %s, want %s", n.Name, addr, a.pod, p.Name)
				}
			}
		}
	}
}

// checkLinkDown: the holder's link goes down (the machine falls off the
// network; its kubelet goes with it). Another host takes the address over,
// a long-lived connection to a worker lives on through it, and new
// connections are answered. When the link is back, the address settles
// with one holder and traffic flows.
func checkLinkDown(t *testing.T, c *realcluster.Cluster, dyn dynamic.Interface, s *lbScenario) {
	ctx := t.Context()
	vip := s.vip(t, false)
	own := settledHolder(t, c, dyn, s.name, vip)
	r := newReceivers(t, c)
	h := c.Clients["client"]
	conn := workerConn(t, h, r, vip, own)
	defer conn.Close()

	node := c.Node(own)
	if err := node.SetLink(false); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	linkUp := func() {
		if err := node.SetLink(true); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(linkUp)
	t.Logf("%s holding %s is off the network", own, vip)
	// Requests on the held connection: one may wait for the takeover (a
	// second or so); none may fail.
	for n := range 20 {
		if _, err := conn.getWithin(10 * time.Second); err != nil {
			t.Fatalf("request %d on the long-lived connection with %s down: %v", n, own, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	// New connections: once the new holder's probes find the lost node
	// unhealthy and the node lifecycle controller takes its Pods out of
	// the endpoints (after the node-monitor grace period), every one is
	// answered, none through it.
	client := lbClient(h)
	untilSpread(t, client, r, url(vip), "new connections with "+own+" down", func(got map[string]int) bool {
		return got["error"] == 0 && got[own] == 0
	})

	linkUp()
	up := time.Now()
	t.Logf("%s's link was down for %.1f s", own, up.Sub(cut).Seconds())
	// Back on the network it holds down before it takes its share back,
	// and says so in its Member condition while it does (the other hosts
	// and the operator read it there): its agent asks for a status report
	// on the state change and writes it on new connections, not on those
	// TCP still retransmits on from before the cut.
	var reasons []string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		lb, err := lbapi.NewClient(dyn).Get(ctx, echoNS, s.name)
		if err != nil {
			return false, nil
		}
		for _, h := range lb.Status.Hosts {
			if c := meta.FindStatusCondition(h.Conditions, "Member"); h.Name == own && c != nil &&
				(len(reasons) == 0 || reasons[len(reasons)-1] != c.Reason) {
				reasons = append(reasons, c.Reason)
				t.Logf("%s's Member condition %.1f s after its link came back: %s", own, time.Since(up).Seconds(), c.Reason)
			}
		}
		return slices.Contains(reasons, "HoldDown") && reasons[len(reasons)-1] == "Ready", nil
	})
	if err != nil {
		t.Errorf("%s's Member condition after its link came back: reasons %v, want HoldDown and then Ready: %v", own, reasons, err)
	} else {
		t.Logf("%s's Member condition after its link came back: %v", own, reasons)
	}
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		lb, err := lbapi.NewClient(dyn).Get(ctx, echoNS, s.name)
		if err != nil {
			return false, nil
		}
		for _, h := range lb.Status.Hosts {
			for _, cond := range h.Conditions {
				if cond.Type == "Programmed" && cond.Status != metav1.ConditionTrue {
					return false, nil
				}
			}
		}
		return len(lb.Status.Hosts) == 2, nil
	})
	if err != nil {
		t.Errorf("the hosts are not both programmed after %s came back: %v", own, err)
	}
	if _, err := conn.get(); err != nil {
		t.Errorf("the long-lived connection after %s came back: %v", own, err)
	}
	untilSpread(t, client, r, url(vip), "every connection answered after "+own+" came back", func(got map[string]int) bool { return got["error"] == 0 })
}

// workerConn opens a long-lived connection through vip that reaches a
// worker (the buckets of a load-balancer host's own node are the only ones
// a takeover moves: see dataplane.ForNewFlows) and a Pod not on node avoid.
func workerConn(t *testing.T, h *netlab.Host, r receivers, vip netip.Addr, avoid string) *keepAlive {
	t.Helper()
	for range 50 {
		k, a, err := dialKeepAlive(t.Context(), h, netip.AddrPortFrom(vip, 80))
		if err != nil {
			t.Fatal(err)
		}
		// Masqueraded (Cluster) the address names the receiving node;
		// with Local the Pod's node received it and it saw the VIP.
		via := r.of(a.seen)
		if via == "" {
			via = a.node
		}
		if strings.HasPrefix(via, "node-") && a.node != avoid {
			t.Logf("long-lived connection through %s reaches %s (pod %s on %s)", vip, via, a.pod, a.node)
			return k
		}
		k.Close()
	}
	t.Fatal("no connection reached a worker in 50 attempts")
	return nil
}

// untilSpread makes rounds of 32 connections through u until the answers
// per receiving node ("error" for a failed one) satisfy cond.
func untilSpread(t *testing.T, client *http.Client, r receivers, u, what string, cond func(map[string]int) bool) {
	t.Helper()
	var got map[string]int
	err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		got = map[string]int{}
		for range 32 {
			a, err := get(ctx, client, u)
			if err != nil {
				got["error"]++
				continue
			}
			got[r.of(a.seen)]++
		}
		return cond(got), nil
	})
	if err != nil {
		t.Fatalf("%s: connections by receiving node %v", what, got)
	}
}

// checkOwnNodeOnly: a Local Service whose only Pod runs on the node that
// holds its address is what proxy forwarding cannot serve (the holder
// would DNAT to its own NodePort). The holder says so: a Warning Event
// OwnNodeOnly on the Service and that reason on its Programmed condition.
func checkOwnNodeOnly(t *testing.T, c *realcluster.Cluster, dyn dynamic.Interface) {
	ctx := t.Context()
	s := deploy(t, c, "solo", 1, map[string]string{corev1.LabelHostname: "node-1"}, func(svc *corev1.Service) {
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	})
	vip := s.vip(t, false)
	own := holder(t, dyn, s.name, vip)
	moveTo(ctx, t, c, s.name, own)
	var reason string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		lb, err := lbapi.NewClient(dyn).Get(ctx, echoNS, s.name)
		if err != nil {
			return false, nil
		}
		for _, h := range lb.Status.Hosts {
			for _, cond := range h.Conditions {
				if h.Name == own && cond.Type == "Programmed" {
					reason = cond.Reason
				}
			}
		}
		return reason == "OwnNodeOnly", nil
	})
	if err != nil {
		t.Fatalf("%s's Programmed condition: reason %q, want OwnNodeOnly with the only Pod on %s", own, reason, own)
	}
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		evs, err := c.Client.CoreV1().Events(echoNS).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + s.name + ",reason=OwnNodeOnly"})
		if err != nil {
			return false, nil
		}
		for _, e := range evs.Items {
			if e.Type == corev1.EventTypeWarning && e.InvolvedObject.Kind == "Service" && strings.Contains(e.Message, own) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Errorf("no Warning OwnNodeOnly on Service %s naming %s: %v", s.name, own, err)
	}
}

// checkExcludedNode: a Node labelled as Kubernetes excludes a node from
// load balancers gets no new connections; without the label it gets them
// again.
func checkExcludedNode(t *testing.T, c *realcluster.Cluster, s *lbScenario) {
	ctx := t.Context()
	const node = "node-2"
	label := func(ctx context.Context, on bool) {
		setNodeLabel(ctx, t, c, node, corev1.LabelNodeExcludeBalancers, on)
	}
	r := newReceivers(t, c)
	client := lbClient(c.Clients["client"])
	u := url(s.vip(t, false))
	label(ctx, true)
	t.Cleanup(func() { label(context.Background(), false) })
	untilSpread(t, client, r, u, node+" excluded", func(got map[string]int) bool { return got[node] == 0 && got["error"] == 0 })
	label(ctx, false)
	untilSpread(t, client, r, u, node+" included again", func(got map[string]int) bool { return got[node] > 0 && got["error"] == 0 })
}

// checkAPIServerAway: with the apiserver stopped, kube-proxy and the
// agents keep what they programmed: every new connection is answered and a
// long-lived one lives on. The agents' health checks need no apiserver: a
// worker whose kube-proxy stops answering its /healthz gets no new
// connections, and gets them again once it answers. When the apiserver is
// back, so is everything else.
func checkAPIServerAway(t *testing.T, c *realcluster.Cluster, dyn dynamic.Interface, s *lbScenario) {
	const worker = "node-2"
	vip := s.vip(t, false)
	own := stableHolder(t, c, dyn, s.name, vip)
	r := newReceivers(t, c)
	h := c.Clients["client"]
	conn := workerConn(t, h, r, vip, "")
	defer conn.Close()
	// Found while the apiserver is there to say where it runs.
	freeze := kubeProxyFreezer(t, c, worker)
	if err := c.CP.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	started := false
	start := func() {
		if !started {
			started = true
			if err := c.CP.StartAPIServer(context.Background()); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(start)
	client := lbClient(h)
	deadline := time.Now().Add(15 * time.Second)
	for n := 0; time.Now().Before(deadline); n++ {
		if _, err := conn.get(); err != nil {
			t.Fatalf("request %d on the long-lived connection with the apiserver away: %v", n, err)
		}
		survey(t, client, r, url(vip), 4)
		if addr, _ := hostHolds(t, c.Node(own).Host, vip); !addr {
			// The agents' logs now, from disk (no kubectl without the
			// apiserver), before later checks restart them.
			for _, n := range c.Nodes {
				if n.LoadBalancer {
					logPodTails(t, n, 80, "groundcloud-agent")
				}
			}
			t.Fatalf("%s no longer holds %s with the apiserver away", own, vip)
		}
		time.Sleep(500 * time.Millisecond)
	}
	// Frozen, kube-proxy answers no health check while its rules in the
	// kernel still forward: only the agents' own probes can tell.
	freeze(true)
	untilSpread(t, client, r, url(vip), worker+"'s kube-proxy frozen, the apiserver away", func(got map[string]int) bool {
		return got[worker] == 0 && got["error"] == 0
	})
	freeze(false)
	untilSpread(t, client, r, url(vip), worker+"'s kube-proxy answering again, the apiserver away", func(got map[string]int) bool {
		return got[worker] > 0 && got["error"] == 0
	})
	if _, err := conn.get(); err != nil {
		t.Fatalf("the long-lived connection after %s's kube-proxy came back: %v", worker, err)
	}
	start()
	err := wait.PollUntilContextTimeout(t.Context(), time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, n := range nodes.Items {
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status != corev1.ConditionTrue {
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		t.Errorf("nodes not all Ready after the apiserver came back: %v", err)
	}
	survey(t, client, r, url(vip), 32)
}

// kubeProxyFreezer returns a function that stops (SIGSTOP) or resumes
// (SIGCONT) kube-proxy on node, as a process that hangs; the test ends with
// it running.
func kubeProxyFreezer(t *testing.T, c *realcluster.Cluster, node string) func(frozen bool) {
	t.Helper()
	_, id, err := c.PodContainer(t.Context(), metav1.NamespaceSystem, "k8s-app=kube-proxy", node)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := c.Node(node).ContainerPID(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	frozen := false
	set := func(on bool) {
		sig := unix.SIGCONT
		if on {
			sig = unix.SIGSTOP
		}
		if err := unix.Kill(pid, sig); err != nil {
			t.Fatalf("%v to kube-proxy on %s: %v", sig, node, err)
		}
		frozen = on
	}
	t.Cleanup(func() {
		if frozen {
			_ = unix.Kill(pid, unix.SIGCONT)
		}
	})
	return set
}

// hostHolds reports whether a load-balancer host has vip on its interface
// and in its nftables ruleset.
func hostHolds(t *testing.T, h *netlab.Host, vip netip.Addr) (addr, rules bool) {
	t.Helper()
	out, err := h.Command(t.Context(), "ip", "-o", "addr", "show", "dev", h.Iface).CombinedOutput()
	if err != nil {
		t.Fatalf("ip addr in %s: %v\n%s", h.Name, err, out)
	}
	addr = strings.Contains(string(out), " "+vip.String()+"/")
	fam := "ip"
	if vip.Is6() {
		fam = "ip6"
	}
	// No table is no rule.
	ruleset, _ := h.Command(t.Context(), "nft", "list", "table", fam, "groundcloud").CombinedOutput()
	rules = strings.Contains(string(ruleset), vip.String()+" ")
	return addr, rules
}

// checkSharedAddress: two Services share one requested address on
// different ports (allow-shared-ip), each answered by its own Pods;
// deleting them frees the address (no host holds it, no rule names it, it
// answers no more) and a new Service can request it.
func checkSharedAddress(t *testing.T, c *realcluster.Cluster) {
	ctx := t.Context()
	vip := netip.MustParseAddr("192.0.2.215")
	shared := func(port int32) func(*corev1.Service) {
		return func(svc *corev1.Service) {
			svc.Annotations[annotation.LoadBalancerIPs] = vip.String()
			svc.Annotations[annotation.AllowSharedIP] = "team"
			svc.Spec.Ports = svc.Spec.Ports[:1]
			svc.Spec.Ports[0].Port = port
		}
	}
	a := deploy(t, c, "share-a", 1, nil, shared(80))
	b := deploy(t, c, "share-b", 1, nil, shared(8080))
	if a.vips[0] != vip || b.vips[0] != vip {
		t.Fatalf("share-a got %v, share-b %v; want both %s", a.vips, b.vips, vip)
	}
	client := lbClient(c.Clients["client"])
	for _, s := range []struct {
		name string
		port uint16
	}{{"share-a", 80}, {"share-b", 8080}} {
		u := fmt.Sprintf("http://%s/", netip.AddrPortFrom(vip, s.port))
		waitServing(t, client, u)
		for range 8 {
			ans, err := get(ctx, client, u)
			if err != nil {
				t.Fatalf("%s: %v", u, err)
			}
			if !strings.HasPrefix(ans.pod, s.name+"-") {
				t.Errorf("%s answered by %s, want a Pod of %s", u, ans.pod, s.name)
			}
		}
	}

	for _, name := range []string{"share-a", "share-b"} {
		if err := c.Client.CoreV1().Services(echoNS).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, n := range c.Nodes {
			if !n.LoadBalancer {
				continue
			}
			if addr, rules := hostHolds(t, n.Host, vip); addr || rules {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("%s still held or programmed after both Services were deleted: %v", vip, err)
	}
	if ans, err := get(ctx, client, url(vip)); err == nil {
		t.Errorf("%s answers after its Services were deleted: %+v", vip, ans)
	}
	reuse := deploy(t, c, "reuse", 1, nil, shared(80))
	if reuse.vips[0] != vip {
		t.Errorf("reuse got %v, want the freed %s", reuse.vips, vip)
	}
	waitServing(t, client, url(vip))
}

// checkHostRetired: a load-balancer host whose label is removed loses its
// agent Pod, which shuts down cleanly: its table and addresses are gone,
// the other host serves every address. Labelled again, it serves again
// once it is a Ready member and the address has settled.
func checkHostRetired(t *testing.T, c *realcluster.Cluster, dyn dynamic.Interface, s *lbScenario) {
	ctx := t.Context()
	vip := s.vip(t, false)
	own := settledHolder(t, c, dyn, s.name, vip)
	node := c.Node(own)
	label := func(ctx context.Context, on bool) { setNodeLabel(ctx, t, c, own, annotation.LoadBalancerHostLabel, on) }
	label(ctx, false)
	t.Cleanup(func() { label(context.Background(), true) })
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if _, _, err := c.AgentContainer(ctx, own); err == nil {
			return false, nil
		}
		out, _ := node.Host.Command(ctx, "nft", "list", "tables").CombinedOutput()
		addr, _ := hostHolds(t, node.Host, vip)
		return !strings.Contains(string(out), "groundcloud") && !addr, nil
	})
	if err != nil {
		t.Fatalf("%s still runs its agent, tables or address after its label was removed: %v", own, err)
	}
	r := newReceivers(t, c)
	client := lbClient(c.Clients["client"])
	untilSpread(t, client, r, url(vip), "served by the other host", func(got map[string]int) bool { return got["error"] == 0 })
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return holder(t, dyn, s.name, vip) != own, nil
	})
	if err != nil {
		t.Errorf("status still names %s as the holder of %s: %v", own, vip, err)
	}

	label(ctx, true)
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, _, err := c.AgentContainer(ctx, own)
		return err == nil && len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].Ready, nil
	})
	if err != nil {
		t.Fatalf("no agent on %s after it was labelled again: %v", own, err)
	}
	// Back in the gossip, past its hold-down, and the address settled on
	// one host (its share may move back to it meanwhile).
	settledHolder(t, c, dyn, s.name, vip)
	survey(t, client, r, url(vip), 32)
}

// settledHolder waits until every load-balancer host is a Ready member
// (none in its hold-down after a restart or a link coming back, when it
// would not yet take addresses over) and exactly one host has vip, and
// returns that host: the one whose kernel holds the address.
func settledHolder(t *testing.T, c *realcluster.Cluster, dyn dynamic.Interface, name string, vip netip.Addr) string {
	t.Helper()
	var held []string
	var members map[string]string
	err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		lb, err := lbapi.NewClient(dyn).Get(ctx, echoNS, name)
		if err != nil {
			return false, nil
		}
		members = map[string]string{}
		for _, h := range lb.Status.Hosts {
			for _, cond := range h.Conditions {
				if cond.Type == "Member" {
					members[h.Name] = cond.Reason
				}
			}
		}
		held = nil
		for _, n := range c.Nodes {
			if !n.LoadBalancer {
				continue
			}
			if members[n.Name] != "Ready" {
				return false, nil
			}
			if addr, _ := hostHolds(t, n.Host, vip); addr {
				held = append(held, n.Name)
			}
		}
		return len(held) == 1, nil
	})
	if err != nil {
		t.Fatalf("%s not settled: held by %v, members %v: %v", vip, held, members, err)
	}
	return held[0]
}

// stableHolder is settledHolder's host once it has held vip across an
// agent's ownership hold-down (10 s by default, and 2 s to spare): a host
// whose link came back just before (as after the checks that pull a
// cable) may still be holding down, and take its share back at the end of
// it, while its Member condition still says Ready from before. Checks that
// then cut the agents off the apiserver need the holder they start with to
// stay.
func stableHolder(t *testing.T, c *realcluster.Cluster, dyn dynamic.Interface, name string, vip netip.Addr) string {
	t.Helper()
	held := settledHolder(t, c, dyn, name, vip)
	for range 5 {
		time.Sleep(12 * time.Second)
		now := settledHolder(t, c, dyn, name, vip)
		if now == held {
			return held
		}
		t.Logf("%s moved from %s to %s; waiting for it to stay", vip, held, now)
		held = now
	}
	t.Fatalf("%s never stayed on one host for 12 s", vip)
	return ""
}

// deployOnWorkers is a Local Service whose Pods run on the workers only, one
// each: the load-balancer hosts' nodes fail its healthCheckNodePort, so
// every host computes the same buckets (no host's own node is among the
// healthy ones: see dataplane.ForNewFlows) and a failover moves no flow.
func deployOnWorkers(t *testing.T, c *realcluster.Cluster, name string) *lbScenario {
	t.Helper()
	s := deploy(t, c, name, 2, map[string]string{anyOf: "node-1,node-2"}, func(svc *corev1.Service) {
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	})
	waitServing(t, lbClient(c.Clients["client"]), url(s.vip(t, false)))
	return s
}

// waitPodNetwork waits until every node reaches every Pod of s on another
// node: after a link comes back, the routes through it are gone until
// groundcloud-router's next full check puts the pod routes back.
func waitPodNetwork(t *testing.T, c *realcluster.Cluster, s *lbScenario) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := c.Client.CoreV1().Pods(echoNS).List(ctx, metav1.ListOptions{LabelSelector: "app=" + s.name})
		if err != nil {
			last = err
			return false, nil
		}
		for _, p := range pods.Items {
			if p.Status.PodIP == "" {
				continue
			}
			addr := netip.MustParseAddr(p.Status.PodIP)
			for _, n := range c.Nodes {
				if n.Name == p.Spec.NodeName {
					continue
				}
				client := lbClient(n.Host)
				client.Timeout = time.Second
				if _, err := get(ctx, client, fmt.Sprintf("http://%s/", netip.AddrPortFrom(addr, realcluster.EchoHTTPPort))); err != nil {
					last = fmt.Errorf("%s → %s on %s: %w", n.Name, p.Name, p.Spec.NodeName, err)
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the pod network did not come back: %v (%v)", last, err)
	}
}

// setNodeLabel sets a Node's label key to "true", or removes it.
func setNodeLabel(ctx context.Context, t *testing.T, c *realcluster.Cluster, node, key string, on bool) {
	t.Helper()
	value := "null"
	if on {
		value = `"true"`
	}
	patch := `{"metadata":{"labels":{"` + key + `":` + value + `}}}`
	if _, err := c.Client.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// moveTo has a Deployment's Pods run on node (its kubelet's hostname).
func moveTo(ctx context.Context, t *testing.T, c *realcluster.Cluster, name, node string) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"nodeSelector":{%q:%q}}}}}`, corev1.LabelHostname, node)
	if _, err := c.Client.AppsV1().Deployments(echoNS).Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// checkRoutesMissing: a node whose groundcloud-router cannot program its
// routes to the other nodes' pods (here someone else's blackhole routes to
// their IPv4 pod CIDRs, as a joining node has none yet) says so on its
// Node (groundcloud.io/PodRoutes False), and the agents leave it out:
// every connection through the address is answered, none through that
// node, although its kube-proxy answers /healthz. Once the blackholes are
// gone its router, which watches the kernel's routes, puts its own back,
// and the node carries traffic again. Without the agents' wait, the connections that its
// kube-proxy sends to a Pod elsewhere fail.
func checkRoutesMissing(t *testing.T, c *realcluster.Cluster, s *lbScenario) {
	ctx := t.Context()
	const node = "node-2"
	h := c.Node(node).Host
	nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var cidrs []string
	for _, n := range nodes.Items {
		for _, p := range n.Spec.PodCIDRs {
			if n.Name != node && netip.MustParsePrefix(p).Addr().Is4() {
				cidrs = append(cidrs, p)
			}
		}
	}
	ipRoute := func(args ...string) error {
		out, err := h.Command(context.Background(), "ip", append([]string{"route"}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip route %s on %s: %v: %s", strings.Join(args, " "), node, err, out)
		}
		return nil
	}
	restore := func() {
		for _, p := range cidrs {
			_ = ipRoute("del", "blackhole", p, "proto", "static")
		}
	}
	t.Cleanup(restore)
	r := newReceivers(t, c)
	client := lbClient(c.Clients["client"])
	u := url(s.vip(t, false))
	untilSpread(t, client, r, u, node+" a backend", func(got map[string]int) bool { return got[node] > 0 && got["error"] == 0 })
	// Replaced in one step, so that no sync of the router can put its own
	// route back in between.
	for _, p := range cidrs {
		if err := ipRoute("replace", "blackhole", p, "proto", "static"); err != nil {
			t.Fatal(err)
		}
	}
	broken := time.Now()
	// The router sees the kernel's routes change.
	waitPodRoutesCondition(t, c, node, corev1.ConditionFalse)
	t.Logf("%s reported its routes missing %s after they were replaced", node, time.Since(broken).Round(time.Millisecond))
	untilSpread(t, client, r, u, node+" without pod routes", func(got map[string]int) bool { return got[node] == 0 && got["error"] == 0 })
	restore()
	waitPodRoutesCondition(t, c, node, corev1.ConditionTrue)
	untilSpread(t, client, r, u, node+" with its pod routes back", func(got map[string]int) bool { return got[node] > 0 && got["error"] == 0 })
}

// waitPodRoutesCondition waits until node's groundcloud.io/PodRoutes
// condition has status.
func waitPodRoutesCondition(t *testing.T, c *realcluster.Cluster, node string, status corev1.ConditionStatus) {
	t.Helper()
	var last []corev1.NodeCondition
	err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = n.Status.Conditions
		for _, cond := range n.Status.Conditions {
			if cond.Type == backends.ConditionPodRoutes {
				return cond.Status == status, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("%s: %s never %s; conditions %+v", node, backends.ConditionPodRoutes, status, last)
	}
}

package clustertest

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/lbapi"
	"github.com/groundcloud/groundcloud/test/framework/availability"
	"github.com/groundcloud/groundcloud/test/framework/netlab"
	"github.com/groundcloud/groundcloud/test/framework/realcluster"
)

// Failover of the addresses the load-balancer hosts share over memberlist
// (deploy/'s agents, --vip-ownership=memberlist), on the path users run:
// a client host opens a new connection every 20 ms and pings four
// long-lived ones (test/framework/availability) through a VIP → the holder →
// a worker's kube-proxy → the line echo of a groundcloud-echo Pod, while a
// record of which host holds which address is kept every 20 ms.
const (
	// agentHoldDown is the agents' --ownership-hold-down, the default
	// deploy/ keeps: how long a host that was away waits before it takes
	// its share back.
	agentHoldDown = 10 * time.Second
	// failoverLimit is "about one second" of failure detection, with room
	// for a loaded machine.
	failoverLimit = 2 * time.Second
)

// haScenario is a Deployment of echo Pods on the workers and the
// LoadBalancer Services in front of it that a failover check creates.
type haScenario struct {
	c       *realcluster.Cluster
	dyn     dynamic.Interface
	lbs     []*netlab.Host
	client  *netlab.Host
	holders *availability.Holders
	app     string
	// mods shape every Service (forwarding, policy).
	mods []func(*corev1.Service)
	// stop ends the record of the holders; it must run before the cluster
	// closes (its netlink sockets are in the hosts' namespaces).
	stop func()
}

// newHAScenario runs two echo Pods named app, one on each worker, and
// records the load-balancer hosts' addresses until t ends. The Services the
// checks create are deleted when t ends too.
func newHAScenario(t *testing.T, c *realcluster.Cluster, dyn dynamic.Interface, app string, mods ...func(*corev1.Service)) *haScenario {
	t.Helper()
	ctx := t.Context()
	d := c.EchoDeployment(echoNS, app, 2)
	d.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"node-1", "node-2"}}},
		}}},
	}}
	d.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
	}}
	if _, err := c.Client.AppsV1().Deployments(echoNS).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		svcs, _ := c.Client.CoreV1().Services(echoNS).List(ctx, metav1.ListOptions{LabelSelector: "groundcloud.test/app=" + app})
		if svcs != nil {
			for _, s := range svcs.Items {
				_ = c.Client.CoreV1().Services(echoNS).Delete(ctx, s.Name, metav1.DeleteOptions{})
			}
		}
		_ = c.Client.AppsV1().Deployments(echoNS).Delete(ctx, app, metav1.DeleteOptions{})
	})
	if err := c.WaitDeploymentReady(ctx, echoNS, app); err != nil {
		t.Fatal(err)
	}
	lbs := lbHosts(c)
	holders, err := availability.WatchHolders(lbs, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	stop := sync.OnceFunc(holders.Stop)
	t.Cleanup(stop)
	return &haScenario{c: c, dyn: dyn, lbs: lbs, client: c.Clients["client"], holders: holders, app: app, mods: mods, stop: stop}
}

// createService creates Service name in front of the Pods: port 80 to
// their line echo, 8080 to their HTTP answer. It returns the Service's
// addresses (want of them) once it has them.
func (s *haScenario) createService(t *testing.T, name string, want int, mods ...func(*corev1.Service)) []netip.Addr {
	t.Helper()
	ctx := t.Context()
	svc := realcluster.LoadBalancerService(echoNS, name)
	svc.Labels = map[string]string{"groundcloud.test/app": s.app}
	svc.Annotations = map[string]string{}
	svc.Spec.Selector = map[string]string{"app": s.app}
	svc.Spec.Ports = []corev1.ServicePort{
		{Name: "lines", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(realcluster.EchoLinesPort)},
		{Name: "http", Protocol: corev1.ProtocolTCP, Port: 8080, TargetPort: intstr.FromInt32(realcluster.EchoHTTPPort)},
	}
	for _, m := range slices.Concat(s.mods, mods) {
		m(svc)
	}
	if _, err := s.c.Client.CoreV1().Services(echoNS).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var addrs []netip.Addr
	eventually(t, fmt.Sprintf("%d addresses of Service %s", want, name), func(ctx context.Context) bool {
		got, err := s.c.Client.CoreV1().Services(echoNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil || len(got.Status.LoadBalancer.Ingress) < want {
			return false
		}
		addrs = nil
		for _, in := range got.Status.LoadBalancer.Ingress {
			addrs = append(addrs, netip.MustParseAddr(in.IP))
		}
		return true
	})
	return addrs
}

// createServices creates n Services "<prefix>-<i>" and returns their IPv4
// addresses, once each is held by exactly one host.
func (s *haScenario) createServices(t *testing.T, prefix string, n int) []netip.Addr {
	t.Helper()
	var out []netip.Addr
	for i := range n {
		out = append(out, s.createService(t, fmt.Sprintf("%s-%d", prefix, i), 1)[0])
	}
	for _, v := range out {
		if _, err := s.holders.WaitHeld(t.Context(), v, 2*time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// owners returns the host holding each address (one each, or it fails).
func (s *haScenario) owners(t *testing.T, vips []netip.Addr) map[netip.Addr]string {
	t.Helper()
	out := map[netip.Addr]string{}
	for _, v := range vips {
		h := s.holders.Now(v)
		if len(h) != 1 {
			t.Fatalf("%s held by %v, want exactly one host", v, h)
		}
		out[v] = h[0]
	}
	return out
}

// settle waits until every address is held by one host and that has not
// changed for quiet, and returns the holders.
func (s *haScenario) settle(t *testing.T, vips []netip.Addr, quiet time.Duration) map[netip.Addr]string {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		start := time.Now()
		stable := true
		for _, v := range vips {
			ch := s.holders.Changes(v, start.Add(-quiet))
			if len(ch) != 1 || len(ch[0].Hosts) != 1 {
				stable = false
			}
		}
		if stable {
			return s.owners(t, vips)
		}
		if time.Now().After(deadline) {
			var now []string
			for _, v := range vips {
				now = append(now, fmt.Sprintf("%s: %v", v, s.holders.Now(v)))
			}
			t.Fatalf("addresses not settled within two minutes: %s", strings.Join(now, ", "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// takenOver waits until host (any but the holders at since, when empty)
// holds vip and returns how long after since it started to.
func (s *haScenario) takenOver(vip netip.Addr, host string, since time.Time) (time.Duration, error) {
	old := s.holders.Changes(vip, since)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, c := range s.holders.Changes(vip, since) {
			for _, h := range c.Hosts {
				if h == host || host == "" && len(old) > 0 && !slices.Contains(old[0].Hosts, h) {
					return c.At.Sub(since), nil
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return 0, fmt.Errorf("%s not taken over within 10s: %v", vip, s.holders.Changes(vip, since))
}

// withoutHost waits until the addresses the gone host held have a new
// single holder, and returns the addresses.
func (s *haScenario) withoutHost(vips []netip.Addr, before map[netip.Addr]string, gone string) []netip.Addr {
	for _, v := range vips {
		if before[v] != gone {
			continue
		}
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if h := s.holders.Now(v); len(h) == 1 && h[0] != gone {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return vips
}

// lbIndex is the index of a load-balancer host in s.lbs.
func (s *haScenario) lbIndex(name string) int {
	return slices.IndexFunc(s.lbs, func(h *netlab.Host) bool { return h.Name == name })
}

// statusOf returns LoadBalancer name and the host its status says holds
// vip.
func (s *haScenario) statusOf(ctx context.Context, name string, vip netip.Addr) (string, *v1alpha1.LoadBalancer) {
	lb, err := lbapi.NewClient(s.dyn).Get(ctx, echoNS, name)
	if err != nil {
		return "", nil
	}
	for _, a := range lb.Status.Addresses {
		if a.Address == vip.String() {
			return a.Host, lb
		}
	}
	return "", lb
}

// waitReadyMembers waits until the status of each LoadBalancer
// "<prefix>-<i>" shows every load-balancer host as a Ready member
// (condition Member True in status.hosts).
func (s *haScenario) waitReadyMembers(t *testing.T, prefix string, n int) {
	t.Helper()
	for i := range n {
		name := fmt.Sprintf("%s-%d", prefix, i)
		eventually(t, "every load-balancer host a Ready member in the status of "+name, func(ctx context.Context) bool {
			_, lb := s.statusOf(ctx, name, netip.Addr{})
			if lb == nil {
				return false
			}
			ready := 0
			for _, h := range lb.Status.Hosts {
				for _, c := range h.Conditions {
					if c.Type == "Member" && c.Status == metav1.ConditionTrue {
						ready++
					}
				}
			}
			return ready == len(s.lbs)
		})
	}
}

// startClient starts new connections every 20 ms and 4 long-lived ones to
// vip:80 from the client host; it is stopped with the test.
func (s *haScenario) startClient(t *testing.T, vip netip.Addr, o availability.Options) *availability.Client {
	t.Helper()
	o.From, o.To = s.client, netip.AddrPortFrom(vip, 80)
	c, err := availability.Start(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// expectRecovered measures new connections around fault and checks that
// they came back within failoverLimit and that the long-lived ones lived
// on: none broke, each answered after the outage.
func expectRecovered(t *testing.T, c *availability.Client, what string, fault time.Time) availability.Outage {
	t.Helper()
	time.Sleep(3 * time.Second) // pings after the outage, and time for TCP's retransmissions
	o := availability.Measure(c.Attempts(), fault, fault.Add(-500*time.Millisecond), time.Now().Add(-time.Second))
	t.Logf("%s: new connections: %d attempts, %d failed, gap %s, recovered %s after the fault", what, o.Attempts, o.Failed, o.Gap.Round(time.Millisecond), o.Recovered.Round(time.Millisecond))
	if o.Unrecovered || o.Gap > failoverLimit {
		t.Errorf("%s: new connections did not recover within %s: %+v", what, failoverLimit, o)
	}
	expectHeld(t, c, what, fault.Add(o.Recovered))
	return o
}

// expectHeld checks that no long-lived connection broke and each answered
// after since.
func expectHeld(t *testing.T, c *availability.Client, what string, since time.Time) {
	t.Helper()
	for i, conn := range c.Conns() {
		t.Logf("%s: long-lived connection %d to %s: %d pings, longest wait %s, err %v", what, i, conn.Node, conn.Pings, conn.MaxStall.Round(time.Millisecond), conn.Err)
		if conn.Err != nil {
			t.Errorf("%s: long-lived connection %d to %s broke: %v", what, i, conn.Node, conn.Err)
		}
		if !conn.LastPong.After(since) {
			t.Errorf("%s: long-lived connection %d to %s has not answered since %s", what, i, conn.Node, since.Format(time.StampMilli))
		}
	}
}

// metric reads one sample from the /metrics of load-balancer host i's
// agent (0 when absent or unreachable).
func (s *haScenario) metric(i int, series string) float64 {
	resp, err := s.lbs[i].HTTPClient().Get("http://127.0.0.1:10263/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err == nil {
				return f
			}
		}
	}
	return 0
}

// eventWith waits for an Event with the reason on Service service (any
// Service when empty) whose message contains every one of texts.
func (s *haScenario) eventWith(t *testing.T, reason, service string, texts ...string) {
	t.Helper()
	eventually(t, fmt.Sprintf("event %s on %q containing %q", reason, service, texts), func(ctx context.Context) bool {
		evs, err := s.c.Client.CoreV1().Events(echoNS).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + reason})
		if err != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Kind != "Service" || service != "" && e.InvolvedObject.Name != service {
				continue
			}
			all := true
			for _, text := range texts {
				all = all && strings.Contains(e.Message, text)
			}
			if all {
				t.Logf("event %s on %s/%s: %s", e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
				return true
			}
		}
		return false
	})
}

// eventually waits up to two minutes for cond.
func eventually(t *testing.T, what string, cond func(context.Context) bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		return cond(ctx), nil
	})
	if err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// l2Failover is TestBGP's failover of the L2 pool: three dedicated
// load-balancer hosts share six addresses; one's link goes down and comes
// back, then the apiserver is away for a minute.
type l2Failover struct {
	*haScenario
	vips   []netip.Addr
	before map[netip.Addr]string
}

// checkSpread: the six addresses spread over the hosts once every host is
// a Ready member; the status names each one's holder; connections through
// one reach Pods by both workers' kube-proxy.
func (s *l2Failover) checkSpread(t *testing.T) {
	s.vips = s.createServices(t, "fo", 6)
	// Agents that start together each wait a hold-down before they hold
	// anything (each has seen the others): the owners are final once
	// every host is a Ready member and nothing moved for a while.
	s.waitReadyMembers(t, "fo", 6)
	s.before = s.settle(t, s.vips, time.Second)
	hosts := map[string]int{}
	for _, h := range s.before {
		hosts[h]++
	}
	t.Logf("owners: %v", s.before)
	if len(hosts) < 2 {
		t.Errorf("six addresses all on %v", hosts)
	}
	for i, v := range s.vips {
		name := fmt.Sprintf("fo-%d", i)
		eventually(t, "status of "+name+" names "+s.before[v], func(ctx context.Context) bool {
			h, _ := s.statusOf(ctx, name, v)
			return h == s.before[v]
		})
	}
	u := fmt.Sprintf("http://%s/", netip.AddrPortFrom(s.vips[0], 8080))
	waitServing(t, lbClient(s.client), u)
	got := survey(t, lbClient(s.client), newReceivers(t, s.c), u, 32)
	t.Logf("through %s: connections by receiving node %v", u, got)
	for _, n := range []string{"node-1", "node-2"} {
		if got[n] == 0 {
			t.Errorf("no connection through %s reached %s", u, n)
		}
	}
}

// owner is the host holding the first address before the failures.
func (s *l2Failover) owner() string { return s.before[s.vips[0]] }

// checkLinkDown: the first address's owner falls off the network (its
// link, and with it its way to the apiserver): new connections recover in
// about a second, the long-lived ones live on, only its addresses move and
// each to one live host.
func (s *l2Failover) checkLinkDown(t *testing.T) {
	vip, owner := s.vips[0], s.owner()
	node := s.c.Node(owner)
	c := s.startClient(t, vip, availability.Options{})
	time.Sleep(time.Second)
	fault := time.Now()
	if err := node.SetLink(false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			_ = node.SetLink(true)
		}
	})
	took, err := s.takenOver(vip, "", fault)
	if err != nil {
		t.Error(err)
	}
	o := expectRecovered(t, c, "link down", fault)
	t.Logf("link down: %s taken over %s after the fault", vip, took)
	t.Logf("GAP link-down hosts=3 gap=%s recovered=%s", o.Gap, o.Recovered)
	after := s.owners(t, s.withoutHost(s.vips, s.before, owner))
	for v, h := range s.before {
		if h != owner && after[v] != h {
			t.Errorf("%s moved from %s to %s, though %s stayed up", v, h, after[v], h)
		}
	}
	for _, v := range s.vips {
		if s.before[v] == owner {
			if now := s.holders.Now(v); len(now) != 1 || now[0] == owner {
				t.Errorf("%s of the host off the network is held by %v", v, now)
			}
		}
	}
}

// checkComesBack: the host's link is back; each address moves at most
// once (back to its owner, after the hold-down) and the owners are those
// before the failure; the long-lived connections live on.
func (s *l2Failover) checkComesBack(t *testing.T) {
	vip := s.vips[0]
	c := s.startClient(t, vip, availability.Options{})
	time.Sleep(500 * time.Millisecond)
	back := time.Now()
	if err := s.c.Node(s.owner()).SetLink(true); err != nil {
		t.Fatal(err)
	}
	time.Sleep(agentHoldDown + 5*time.Second)
	for _, v := range s.vips {
		ch := s.holders.Changes(v, back)
		if m := availability.Moves(ch); m > 1 {
			t.Errorf("%s moved %d times after the host came back: %v", v, m, ch)
		}
	}
	again := s.settle(t, s.vips, time.Second)
	if fmt.Sprint(again) != fmt.Sprint(s.before) {
		t.Errorf("owners after the return %v, want those before the failure %v", again, s.before)
	}
	o := availability.Measure(c.Attempts(), back, back, time.Now().Add(-time.Second))
	t.Logf("take-back: %d attempts, %d failed, gap %s", o.Attempts, o.Failed, o.Gap)
	for i, conn := range c.Conns() {
		if conn.Err != nil {
			t.Errorf("take-back: long-lived connection %d broke: %v", i, conn.Err)
		}
	}
}

// checkAPIServerAway: the apiserver stopped for a minute: no new
// connection fails, no address moves, the long-lived connections answer
// to the end.
func (s *l2Failover) checkAPIServerAway(t *testing.T) {
	vip := s.vips[0]
	before := s.settle(t, s.vips, time.Second)
	// What could fail here is a refused or reset connection (rules gone)
	// or an address that moves, not latency: a 3 s bound per attempt
	// keeps a busy machine's scheduling stalls out of the count, while a
	// refusal still fails at once and a moved or lost address fails the
	// check on holders below.
	c := s.startClient(t, vip, availability.Options{Timeout: 3 * time.Second})
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	if err := s.c.CP.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	started := false
	startAPIServer := func() {
		if !started {
			started = true
			if err := s.c.CP.StartAPIServer(context.Background()); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(startAPIServer)
	time.Sleep(60 * time.Second)
	o := availability.Measure(c.Attempts(), start, start, time.Now())
	startAPIServer()
	t.Logf("apiserver away: %d attempts, %d failed", o.Attempts, o.Failed)
	logFailures(t, "apiserver away", c.Attempts(), start)
	if o.Failed > 0 || o.Attempts < 1000 {
		t.Errorf("with the apiserver away: %+v, want over 1000 attempts and none failed", o)
	}
	for _, v := range s.vips {
		if ch := s.holders.Changes(v, start); len(ch) != 1 || !slices.Equal(ch[0].Hosts, []string{before[v]}) {
			t.Errorf("%s changed while the apiserver was away: %v", v, ch)
		}
	}
	expectHeld(t, c, "apiserver away", start.Add(59*time.Second))
}

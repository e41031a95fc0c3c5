package clustertest

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/groundcloud/groundcloud/internal/annotation"
	"github.com/groundcloud/groundcloud/test/framework/availability"
	"github.com/groundcloud/groundcloud/test/framework/netlab"
	"github.com/groundcloud/groundcloud/test/framework/realcluster"
)

// An agent restarted where no other load-balancer host takes its
// addresses (docs/high-availability.md, "Restarts and upgrades"). Pool
// "solo" selects the hosts labelled soloLabel, lb-1 alone: its addresses
// have one load-balancer host, as in a cluster of one, while the cluster
// keeps its second host for the other checks.
const (
	soloPool  = "solo"
	soloLabel = "node-restriction.kubernetes.io/solo"
	soloHost  = "lb-1"
)

// soloCloudConfig adds pool "solo": four addresses of the lab's IPv4
// subnet after pool "default", held on the link by the hosts labelled
// soloLabel.
func soloCloudConfig(c *realcluster.Cluster) string {
	return fmt.Sprintf("[Pool %q]\naddresses = %s\nauto-assign = false\nhosts = %s=true\n\n",
		soloPool, netlab.RangeIn(c.Opts.Subnet4, 220, 223), soloLabel)
}

// soloRestart is Services of pool "solo", one per forwarding, and their
// clients.
type soloRestart struct {
	*haScenario
	vips []netip.Addr // of the Services, once checkRestarted made them
}

// soloService is a Service of pool "solo" and the forwarding it asks for.
type soloService struct {
	forwarding string
	vip        netip.Addr
	client     *availability.Client
}

// newSoloRestart labels lb-1 the only host of pool "solo" until stop.
func newSoloRestart(t *testing.T, c *realcluster.Cluster, dyn dynamic.Interface) *soloRestart {
	setNodeLabel(t.Context(), t, c, soloHost, soloLabel, true)
	return &soloRestart{haScenario: newHAScenario(t, c, dyn, soloPool)}
}

// stop ends the record of the holders and takes the label off lb-1; it
// must run before the cluster closes.
func (s *soloRestart) stop(t *testing.T) {
	s.haScenario.stop()
	setNodeLabel(context.Background(), t, s.c, soloHost, soloLabel, false)
}

// checkRestarted: the agent Pod of the only host of the addresses deleted,
// as a rolling update or a helm upgrade does (SIGTERM; the DaemonSet
// starts a new one), while a client of each address (a Service with proxy
// forwarding, whose traffic only the agent's rules carry, and one with
// passthrough) opens a new connection every 20 ms and holds four: none
// fails, none breaks, the addresses never leave the host, and the new
// agent holds and reports them.
func (s *soloRestart) checkRestarted(t *testing.T) {
	ctx := t.Context()
	svcs := []*soloService{{forwarding: "proxy"}, {forwarding: "passthrough"}}
	for i, svc := range svcs {
		name := fmt.Sprintf("%s-%d", soloPool, i)
		svc.vip = s.createService(t, name, 1, inPool(soloPool), func(o *corev1.Service) {
			o.Annotations[annotation.Forwarding] = svc.forwarding
		})[0]
		s.vips = append(s.vips, svc.vip)
		if h, err := s.holders.WaitHeld(ctx, svc.vip, 2*time.Minute); err != nil || h != soloHost {
			t.Fatalf("%s held by %q (%v), want %s, the only host of pool %s", svc.vip, h, err, soloHost, soloPool)
		}
	}
	s.waitReadyMembers(t, soloPool, len(svcs))
	for _, svc := range svcs {
		waitServing(t, lbClient(s.client), fmt.Sprintf("http://%s/", netip.AddrPortFrom(svc.vip, 8080)))
		svc.client = s.startClient(t, svc.vip, availability.Options{Every: 20 * time.Millisecond, Held: 4})
	}
	time.Sleep(2 * time.Second) // the held connections open, the streams run

	old, _, err := s.c.AgentContainer(ctx, soloHost)
	if err != nil {
		t.Fatal(err)
	}
	fault := time.Now()
	if err := s.c.Client.CoreV1().Pods(metav1.NamespaceSystem).Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNewAgent(t, s.c, soloHost, old.UID)
	// The new agent a Ready member again, and its hold-down over.
	s.waitReadyMembers(t, soloPool, len(svcs))
	time.Sleep(agentHoldDown)

	for i, svc := range svcs {
		what := fmt.Sprintf("agent Pod deleted on the only host of %s (%s)", svc.vip, svc.forwarding)
		o := availability.Measure(svc.client.Attempts(), fault, fault.Add(-500*time.Millisecond), time.Now().Add(-time.Second))
		t.Logf("%s: new connections: %d attempts, %d failed, gap %s", what, o.Attempts, o.Failed, o.Gap.Round(time.Millisecond))
		if o.Failed > 0 || o.Unrecovered {
			t.Errorf("%s: %d of %d new connections failed (gap %s), want none", what, o.Failed, o.Attempts, o.Gap.Round(time.Millisecond))
		}
		expectHeld(t, svc.client, what, fault)
		for _, ch := range s.holders.Changes(svc.vip, fault) {
			if len(ch.Hosts) != 1 || ch.Hosts[0] != soloHost {
				t.Errorf("%s held by %v at %s (%s after the Pod's deletion), want %s throughout", svc.vip, ch.Hosts, ch.At.Format(time.StampMilli), ch.At.Sub(fault).Round(time.Millisecond), soloHost)
			}
		}
		name := fmt.Sprintf("%s-%d", soloPool, i)
		eventually(t, "the new agent reporting "+svc.vip.String(), func(ctx context.Context) bool {
			h, _ := s.statusOf(ctx, name, svc.vip)
			return h == soloHost
		})
	}
}

// checkRetired: the host's agent stops for good (the host is no longer a
// load-balancer host: the DaemonSet no longer selects its Node). Although
// no other host takes the addresses, it removes them and its tables; labelled again, the host gets its agent back.
func (s *soloRestart) checkRetired(t *testing.T) {
	ctx := t.Context()
	if len(s.vips) == 0 {
		t.Fatal("no Service of pool solo: the restart step before did not set one up")
	}
	node := s.c.Node(soloHost)
	setNodeLabel(ctx, t, s.c, soloHost, annotation.LoadBalancerHostLabel, false)
	t.Cleanup(func() { setNodeLabel(context.Background(), t, s.c, soloHost, annotation.LoadBalancerHostLabel, true) })
	var left string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if _, _, err := s.c.AgentContainer(ctx, soloHost); err == nil {
			left = "its agent"
			return false, nil
		}
		out, _ := node.Host.Command(ctx, "nft", "list", "tables").CombinedOutput()
		var held []netip.Addr
		for _, v := range s.vips {
			if h, _ := hostHolds(t, node.Host, v); h {
				held = append(held, v)
			}
		}
		left = fmt.Sprintf("tables %q, addresses %v", strings.TrimSpace(string(out)), held)
		return !strings.Contains(string(out), "groundcloud") && len(held) == 0, nil
	})
	if err != nil {
		t.Fatalf("%s left %s after its label was removed: %v", soloHost, left, err)
	}
	setNodeLabel(ctx, t, s.c, soloHost, annotation.LoadBalancerHostLabel, true)
	waitNewAgent(t, s.c, soloHost, "")
	for _, v := range s.vips {
		if h, err := s.holders.WaitHeld(ctx, v, 2*time.Minute); err != nil || h != soloHost {
			t.Errorf("%s held by %q (%v) after %s's agent came back, want %s", v, h, err, soloHost, soloHost)
		}
	}
}

// waitNewAgent waits until the agent Pod on node is Ready and is not the
// Pod old (by UID; "" any).
func waitNewAgent(t *testing.T, c *realcluster.Cluster, node string, old types.UID) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, _, err := c.AgentContainer(ctx, node)
		return err == nil && p.UID != old && podReady(p), nil
	})
	if err != nil {
		t.Fatalf("no new Ready agent on %s: %v", node, err)
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// checkAgentsRolledOut: the agent DaemonSet rolled out again (`kubectl
// rollout restart`, what an upgrade does: one host at a time, the next
// host's agent stopped as soon as the new one is Ready, still in its
// --ownership-hold-down) while a client of two passthrough and two proxy
// Services, whose addresses both hosts share, opens a new connection every
// 20 ms to each and holds four: none breaks, some host holds each address
// throughout, and no new connection fails. A new connection fails when it
// is not connected and greeted within rolloutTimeout; those that needed a
// retransmitted SYN (slowConnect) are logged. For proxy, a handshake in flight at a handover whose node's
// SYN-ACK reached the new holder, with no entry for the half-open
// connection, connected on the client's SYN retransmission, a second later
// (one of about 1,300 in one run of seven), until the new holder copied
// such packets to the previous one (State.HandOver, docs/packet-path.md
// "After a hand-over"); none has since, in the runs so far.
// With bgp (TestBGP), a passthrough and a proxy Service of its pool
// announced over BGP roll too (the client behind the router): the same
// checks, but for who holds the address (the router's route instead, which
// the failed connections measure). The BGP proxy Service's were logged
// only while its hand-overs were being fixed (a run found 21 failed where
// the last host stopped while another was Ready but its right to
// advertise still held down, a case membership's Successor now covers,
// TestSuccessor); none failed in the runs since, and they count now.
func checkAgentsRolledOut(t *testing.T, c *realcluster.Cluster, dyn dynamic.Interface, bgp *bgpScenario) {
	ctx := t.Context()
	s := newHAScenario(t, c, dyn, "roll")
	defer s.stop()
	svcs := s.startForwarded(t, "roll", rolloutTimeout)
	var routed []*forwarded
	var routes map[netip.Addr]*routeWatch
	if bgp != nil {
		routed = s.startRouted(t, bgp, "roll-bgp", rolloutTimeout)
		routes = map[netip.Addr]*routeWatch{}
		for _, r := range routed {
			routes[r.vip] = bgp.watchRoute(t, r.vip)
		}
	}

	began := time.Now()
	if err := c.RolloutRestart(ctx, "DaemonSet", "groundcloud-agent"); err != nil {
		t.Fatal(err)
	}
	t.Logf("agents rolled out in %s", time.Since(began).Round(time.Millisecond))
	// The last agent's hold-down over, its share taken back.
	s.waitReadyMembers(t, "roll", len(svcs))
	time.Sleep(agentHoldDown + 2*time.Second)

	for _, r := range slices.Concat(svcs, routed) {
		what := fmt.Sprintf("agents rolled out, %s (%s)", r.vip, r.forwarding)
		o := availability.Measure(r.client.Attempts(), began, began.Add(-500*time.Millisecond), time.Now().Add(-time.Second))
		changes := s.holders.Changes(r.vip, began)
		if r.routed {
			changes = routes[r.vip].changes(began)
		}
		t.Logf("%s: new connections: %d attempts, %d failed (%s), gap %s; holders: %s", what, o.Attempts, o.Failed, failedAt(r.client.Attempts(), began), o.Gap.Round(time.Millisecond), holderChanges(changes, began))
		logFailures(t, what, r.client.Attempts(), began.Add(-500*time.Millisecond))
		for i, conn := range r.client.Conns() {
			if conn.Err != nil {
				t.Logf("%s: long-lived connection %d to %s: last answer %s after the rollout began", what, i, conn.Node, conn.LastPong.Sub(began).Round(time.Millisecond))
			}
		}
		if o.Unrecovered {
			t.Errorf("%s: new connections still failing at the end: %+v", what, o)
		}
		if !r.routed {
			checkHeldThroughout(t, r.vip, s.holders.Changes(r.vip, began), began, "rollout")
		}
		if o.Failed > 0 {
			t.Errorf("%s: %d of %d new connections failed (not connected within %s; gap %s), want none", what, o.Failed, o.Attempts, rolloutTimeout, o.Gap.Round(time.Millisecond))
		}
		slow := slowAttempts(r.client.Attempts(), began.Add(-500*time.Millisecond), time.Now().Add(-time.Second))
		t.Logf("%s: %d new connections took over %s (connected on a retransmitted SYN)", what, slow, slowConnect)
		expectHeld(t, r.client, what, began)
	}
}

// The rolling-update checks' new connections: failed when not connected
// and greeted within rolloutTimeout, slow beyond slowConnect: connected only
// on a retransmitted SYN (TCP's first comes after 1 s). Slow ones are
// logged, not failed, in either forwarding: a CI run of the drain check had
// 4 to 7 on every Service, the one whose address never moved among them,
// with held connections waiting up to 760 ms at the same time — the loaded
// machine, which a timing assertion cannot tell from a lost SYN. Not less: a busy
// 2-core machine running the cluster stalls the client or the hosts for
// several hundred milliseconds now and then (a drain run once measured 4 to
// 6 connections of every Service over 500 ms, the held connections of
// every Service waiting up to 460 ms at the same time, while a compiler ran
// beside it).
const (
	rolloutTimeout = 1500 * time.Millisecond
	slowConnect    = 900 * time.Millisecond
)

// slowAttempts counts the attempts started in [from, until) that succeeded
// after more than slowConnect.
func slowAttempts(attempts []availability.Attempt, from, until time.Time) int {
	n := 0
	for _, a := range attempts {
		if a.Err == nil && a.Took > slowConnect && !a.Start.Before(from) && a.Start.Before(until) {
			n++
		}
	}
	return n
}

// forwarded is a Service of one forwarding, its address and its client.
type forwarded struct {
	forwarding string
	vip        netip.Addr
	client     *availability.Client
	// routed: announced over BGP, not held on a link.
	routed bool
}

// startForwarded creates Services "<prefix>-0" to "-3", passthrough and
// proxy by turns, waits until every load-balancer host is a Ready member
// for them and each answers, and starts a client of each: a new
// connection every 20 ms (each given timeout; 0: the client's 0.5 s), four
// held (open when it returns).
func (s *haScenario) startForwarded(t *testing.T, prefix string, timeout time.Duration) []*forwarded {
	t.Helper()
	var svcs []*forwarded
	for i, fwd := range []string{"passthrough", "proxy", "passthrough", "proxy"} {
		vip := s.createService(t, fmt.Sprintf("%s-%d", prefix, i), 1, func(o *corev1.Service) {
			o.Annotations[annotation.Forwarding] = fwd
		})[0]
		svcs = append(svcs, &forwarded{forwarding: fwd, vip: vip})
	}
	s.waitReadyMembers(t, prefix, len(svcs))
	for _, r := range svcs {
		waitServing(t, lbClient(s.client), fmt.Sprintf("http://%s/", netip.AddrPortFrom(r.vip, 8080)))
		r.client = s.startClient(t, r.vip, availability.Options{Every: 20 * time.Millisecond, Held: 4, Timeout: timeout})
	}
	time.Sleep(2 * time.Second) // the held connections open, the streams run
	return svcs
}

// startRouted creates Services "<prefix>-0" (passthrough: every host of
// bgp advertises it) and "<prefix>-1" (proxy: the host elected for it
// does) in bgp's pool, the nodes routing it through the router (as
// docs/bgp.md asks for proxy forwarding), waits until the router routes
// each to its hosts and it answers, and starts a client of each as
// startForwarded does.
func (s *haScenario) startRouted(t *testing.T, bgp *bgpScenario, prefix string, timeout time.Duration) []*forwarded {
	t.Helper()
	bgp.nodesRouteThroughRouter(t)
	var svcs []*forwarded
	for i, fwd := range []string{"passthrough", "proxy"} {
		vip := s.createService(t, fmt.Sprintf("%s-%d", prefix, i), 1, inPool("bgp"), func(o *corev1.Service) {
			o.Annotations[annotation.Forwarding] = fwd
		})[0]
		svcs = append(svcs, &forwarded{forwarding: fwd, vip: vip, routed: true})
	}
	bgp.waitNexthops(t, svcs[0].vip, bgp.lbs...)
	for _, r := range svcs {
		waitServing(t, lbClient(s.client), fmt.Sprintf("http://%s/", netip.AddrPortFrom(r.vip, 8080)))
		r.client = s.startClient(t, r.vip, availability.Options{Every: 20 * time.Millisecond, Held: 4, Timeout: timeout})
	}
	time.Sleep(2 * time.Second)
	return svcs
}

// failedAt says when the failed attempts since began started, as runs of
// failures less than 100 ms apart: "+12.46s-12.6s (7)".
func failedAt(attempts []availability.Attempt, began time.Time) string {
	var parts []string
	var from, to time.Duration
	n := 0
	flush := func() {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("+%s-%s (%d)", from.Round(10*time.Millisecond), to.Round(10*time.Millisecond), n))
		}
	}
	for _, a := range attempts {
		at := a.Start.Sub(began)
		if a.Err == nil || at < 0 {
			continue
		}
		if n > 0 && at-to > 100*time.Millisecond {
			flush()
			n = 0
		}
		if n == 0 {
			from = at
		}
		to = at
		n++
	}
	flush()
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// noHolderLimit is how long an address may be held by no host in the
// rolling-update and drain checks before they fail. A take-back should
// leave none: the host whose hold-down ends tells the others it is Ready
// only once its sync has added the addresses (membership's Hooks.SyncWait;
// before that order, CI saw 10 and 40 ms). It waits for the sync at most
// a second, so a very slow sync on a loaded machine can still leave a
// moment; shorter ones are logged. A gap a client would notice is far
// longer: a neighbour entry pointing to a host without the address.
const noHolderLimit = 200 * time.Millisecond

// checkHeldThroughout fails the test when changes (of vip, from began)
// show it held by no host for noHolderLimit or longer, and logs shorter
// moments.
func checkHeldThroughout(t *testing.T, vip netip.Addr, changes []availability.Change, began time.Time, what string) {
	t.Helper()
	for i, ch := range changes {
		if len(ch.Hosts) > 0 {
			continue
		}
		end := time.Now()
		if i+1 < len(changes) {
			end = changes[i+1].At
		}
		gap := end.Sub(ch.At)
		if gap >= noHolderLimit {
			t.Errorf("%s held by no host at %s (%s after the %s began) for %s", vip, ch.At.Format(time.StampMilli), ch.At.Sub(began).Round(time.Millisecond), what, gap.Round(time.Millisecond))
			continue
		}
		t.Logf("%s held by no host at %s (%s after the %s began) for %s, under %s", vip, ch.At.Format(time.StampMilli), ch.At.Sub(began).Round(time.Millisecond), what, gap.Round(time.Millisecond), noHolderLimit)
	}
}

// logFailures logs the first few attempts started at or after began that
// failed: when, how long they waited and why, which tells a handshake lost
// in flight (a timeout) from a reset.
func logFailures(t *testing.T, what string, attempts []availability.Attempt, began time.Time) {
	t.Helper()
	logged := 0
	for _, a := range attempts {
		if a.Err == nil || a.Start.Before(began) {
			continue
		}
		if logged == 5 {
			t.Logf("%s: more failed attempts not shown", what)
			return
		}
		t.Logf("%s: failed attempt at +%s after %s: %v", what, a.Start.Sub(began).Round(time.Millisecond), a.Took.Round(time.Millisecond), a.Err)
		logged++
	}
}

// routeWatch samples the router's next hops for an address every 50 ms
// until the test ends.
type routeWatch struct {
	mu   sync.Mutex
	list []availability.Change
}

func (s *bgpScenario) watchRoute(t *testing.T, vip netip.Addr) *routeWatch {
	w := &routeWatch{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		var last []string
		for ctx.Err() == nil {
			hops, err := s.r.Nexthops(ctx, netip.PrefixFrom(vip, vip.BitLen()))
			if err == nil {
				var hosts []string
				for _, h := range s.lbs {
					if slices.Contains(hops, h.Addr4) || slices.Contains(hops, h.Addr6) {
						hosts = append(hosts, h.Name)
					}
				}
				if !slices.Equal(hosts, last) || len(w.list) == 0 {
					w.mu.Lock()
					w.list = append(w.list, availability.Change{At: time.Now(), Hosts: hosts})
					w.mu.Unlock()
					last = hosts
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return w
}

// changes are the next hops at since (dated since) and their changes
// after it.
func (w *routeWatch) changes(since time.Time) []availability.Change {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []availability.Change
	for _, c := range w.list {
		if c.At.Before(since) {
			c.At = since
			out = []availability.Change{c}
			continue
		}
		out = append(out, c)
	}
	return out
}

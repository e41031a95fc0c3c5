package agent

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/bgp"
	"github.com/groundcloud/groundcloud/internal/config"
	"github.com/groundcloud/groundcloud/internal/dataplane"
	"github.com/groundcloud/groundcloud/internal/membership"
)

func withAnnounce(mode, selector string) func(*v1alpha1.LoadBalancer) {
	return func(lb *v1alpha1.LoadBalancer) {
		lb.Spec.Announce = &v1alpha1.Announce{Mode: mode, HostSelector: selector}
	}
}

func withForwarding(f string) func(*v1alpha1.LoadBalancer) {
	return func(lb *v1alpha1.LoadBalancer) { lb.Spec.Forwarding = f }
}

func TestAnnounceOf(t *testing.T) {
	edge := labels.Set{"example.net/edge": "true"}
	lbs := []*v1alpha1.LoadBalancer{
		newLB("old", withAddresses("192.0.2.1")), // no announce: L2, every host
		newLB("l2-edge", withAddresses("192.0.2.2"), withAnnounce(v1alpha1.AnnounceL2, "example.net/edge=true")),
		newLB("ecmp", withAddresses("192.0.2.3", "2001:db8::3"), withAnnounce(v1alpha1.AnnounceBGP, ""), withForwarding(v1alpha1.ForwardingPassthrough)),
		newLB("proxy-edge", withAddresses("192.0.2.4"), withAnnounce(v1alpha1.AnnounceBGP, "example.net/edge=true"), withForwarding(v1alpha1.ForwardingProxy)),
		newLB("bad-selector", withAddresses("192.0.2.5"), withAnnounce(v1alpha1.AnnounceBGP, "a b c")),
	}
	addrs := func(ss ...string) []netip.Addr {
		var out []netip.Addr
		for _, s := range ss {
			out = append(out, netip.MustParseAddr(s))
		}
		return out
	}
	set := func(ss ...string) map[netip.Addr]bool {
		out := map[netip.Addr]bool{}
		for _, a := range addrs(ss...) {
			out[a] = true
		}
		return out
	}
	for _, tt := range []struct {
		name string
		host labels.Set
		want announcing
	}{
		{
			name: "an edge host",
			host: edge,
			want: announcing{
				l2: set("192.0.2.1", "192.0.2.2"),
				bgp: []bgp.Service{
					{Addrs: addrs("192.0.2.3", "2001:db8::3"), ECMP: true},
					{Addrs: addrs("192.0.2.4")},
				},
				bgpAddrs: set("192.0.2.3", "2001:db8::3", "192.0.2.4", "192.0.2.5"),
			},
		},
		{
			name: "another host: only what selects every host",
			host: labels.Set{"example.net/edge": "false"},
			want: announcing{
				l2:       map[netip.Addr]bool{netip.MustParseAddr("192.0.2.1"): true, netip.MustParseAddr("192.0.2.2"): false},
				bgp:      []bgp.Service{{Addrs: addrs("192.0.2.3", "2001:db8::3"), ECMP: true}},
				bgpAddrs: set("192.0.2.3", "2001:db8::3", "192.0.2.4", "192.0.2.5"),
			},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := announceOf(lbs, tt.host)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(announcing{}), cmpopts.EquateComparable(netip.Addr{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("announceOf (-want +got):\n%s", diff)
			}
		})
	}
}

// recordingAnnouncer records the routes it is given.
type recordingAnnouncer struct {
	mu   sync.Mutex
	last []bgp.Route
}

func (r *recordingAnnouncer) Set(routes []bgp.Route) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = routes
}

// Advertised says every route is carried, as by a router that is up.
func (r *recordingAnnouncer) Advertised(routes []bgp.Route) []bgp.Route { return routes }

func (r *recordingAnnouncer) prefixes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, rt := range r.last {
		out = append(out, rt.Prefix.String())
	}
	return out
}

// recordingAddresses records the addresses the agent holds, and those it
// holds quiet.
type recordingAddresses struct {
	noAddresses
	mu    sync.Mutex
	held  []netip.Addr
	quiet []netip.Addr
}

func (r *recordingAddresses) Quiet(addrs []netip.Addr) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.quiet = slices.Clone(addrs)
}

func (r *recordingAddresses) Set(_ context.Context, want []netip.Addr) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held = slices.Clone(want)
	return nil
}

// failingDataPlane fails every sync while fail is set.
type failingDataPlane struct {
	recordingDataPlane
	fail bool
}

func (f *failingDataPlane) Sync(ctx context.Context, st dataplane.State) (dataplane.Result, error) {
	if f.fail {
		return dataplane.Result{}, errors.New("injected data plane failure")
	}
	return f.recordingDataPlane.Sync(ctx, st)
}

// The addresses of BGP pools are advertised, never held on the interface;
// a host whose data plane fails withdraws them.
func TestSyncAdvertisesBGPAddresses(t *testing.T) {
	noCheck := func(lb *v1alpha1.LoadBalancer) { lb.Spec.HealthCheck = nil }
	dp := &failingDataPlane{}
	ann := &recordingAnnouncer{}
	addrs := &recordingAddresses{}
	a := testAgent(t, Config{DataPlane: dp, Addresses: addrs, Announcer: ann, HostLabels: FixedLabels{"rack": "a"}},
		newLB("l2", noCheck, withAddresses("192.0.2.1")),
		newLB("ecmp", noCheck, withAddresses("192.0.2.2", "2001:db8::2"), withAnnounce(v1alpha1.AnnounceBGP, "rack=a"), withForwarding(v1alpha1.ForwardingPassthrough)),
		newLB("other-rack", noCheck, withAddresses("192.0.2.3"), withAnnounce(v1alpha1.AnnounceBGP, "rack=b"), withForwarding(v1alpha1.ForwardingPassthrough)),
	)
	startInformer(t, a)
	if err := a.sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"192.0.2.2/32", "2001:db8::2/128"}, ann.prefixes()); diff != "" {
		t.Errorf("advertised (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]netip.Addr{netip.MustParseAddr("192.0.2.1")}, addrs.held, cmpopts.EquateComparable(netip.Addr{})); diff != "" {
		t.Errorf("held on the interface (-want +got):\n%s", diff)
	}
	dp.fail = true
	_ = a.sync(t.Context())
	if got := ann.prefixes(); len(got) != 0 {
		t.Errorf("with its data plane failing the host still advertises %v", got)
	}
}

// In a drain hand-over, the addresses the host releases stay held but
// quiet (not announced); when the hand-over ends, none is.
func TestSyncHoldsReleasedAddressesQuiet(t *testing.T) {
	noCheck := func(lb *v1alpha1.LoadBalancer) { lb.Spec.HealthCheck = nil }
	kept, released := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::2")
	owner := &ownerOf{}
	owner.set(kept, released)
	owner.releasing = map[netip.Addr]bool{released: true}
	addrs := &recordingAddresses{}
	a := testAgent(t, Config{DataPlane: &failingDataPlane{}, Addresses: addrs, Owner: owner},
		newLB("web", noCheck, withAddresses(kept.String(), released.String())),
	)
	startInformer(t, a)
	if err := a.sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	eq := cmpopts.EquateComparable(netip.Addr{})
	if diff := cmp.Diff([]netip.Addr{kept, released}, addrs.held, eq); diff != "" {
		t.Errorf("held (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]netip.Addr{released}, addrs.quiet, eq); diff != "" {
		t.Errorf("quiet (-want +got):\n%s", diff)
	}
	owner.set(kept) // the hand-over is over: the other host holds it
	owner.releasing = nil
	if err := a.sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]netip.Addr{kept}, addrs.held, eq); diff != "" {
		t.Errorf("held after the hand-over (-want +got):\n%s", diff)
	}
	if len(addrs.quiet) != 0 {
		t.Errorf("quiet after the hand-over: %v, want none", addrs.quiet)
	}
}

// status.hosts[].announcing says what the routers hear: none of the
// addresses while the speaker has no session established (it could not
// start, the router is down), though the host serves them.
func TestAnnouncingIsWhatSessionsCarry(t *testing.T) {
	noCheck := func(lb *v1alpha1.LoadBalancer) { lb.Spec.HealthCheck = nil }
	sp := bgp.New(bgp.Config{RouterID: netip.MustParseAddr("192.0.2.100"), Peers: []bgp.Peer{
		{Name: "tor", Address: netip.MustParseAddr("10.0.0.1"), ASN: 64512, LocalASN: 64513, Families: []string{"ipv4"}},
	}})
	a := testAgent(t, Config{DataPlane: &failingDataPlane{}, Announcer: sp},
		newLB("ecmp", noCheck, withAddresses("192.0.2.2"), withAnnounce(v1alpha1.AnnounceBGP, ""), withForwarding(v1alpha1.ForwardingPassthrough)),
	)
	startInformer(t, a)
	if err := a.sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	r, ok := a.reports.take()
	if !ok {
		t.Fatal("the sync reported nothing")
	}
	if len(r.announced) > 0 {
		t.Errorf("status says the host announces %v; no session is established", r.announced)
	}
}

// TestHostSelectorLimitIsTheGossips: the cloud-config allows as many
// different host selectors as a host can publish groups in its gossip
// metadata, so no host is left out of a group it matches.
func TestHostSelectorLimitIsTheGossips(t *testing.T) {
	if config.MaxHostSelectors != membership.MaxGroups {
		t.Errorf("config.MaxHostSelectors = %d, membership.MaxGroups = %d: want them equal", config.MaxHostSelectors, membership.MaxGroups)
	}
}

func TestGroupsOf(t *testing.T) {
	lbs := []*v1alpha1.LoadBalancer{
		newLB("all", withAddresses("192.0.2.1")),
		newLB("l2-edge", withAddresses("192.0.2.2"), withAnnounce(v1alpha1.AnnounceL2, "edge=true")),
		newLB("proxy-edge", withAddresses("192.0.2.3"), withAnnounce(v1alpha1.AnnounceBGP, "edge=true"), withForwarding(v1alpha1.ForwardingProxy)),
		newLB("ecmp-edge", withAddresses("192.0.2.4"), withAnnounce(v1alpha1.AnnounceBGP, "edge=true"), withForwarding(v1alpha1.ForwardingPassthrough)),
		newLB("l2-core", withAddresses("192.0.2.5"), withAnnounce(v1alpha1.AnnounceL2, "core=true")),
	}
	edge, core := membership.Group("edge=true"), membership.Group("core=true")
	groups, mine := groupsOf(lbs, labels.Set{"edge": "true"})
	want := map[netip.Addr]string{
		netip.MustParseAddr("192.0.2.2"): edge,
		netip.MustParseAddr("192.0.2.3"): edge,
		netip.MustParseAddr("192.0.2.5"): core,
	}
	if diff := cmp.Diff(want, groups, cmpopts.EquateComparable(netip.Addr{})); diff != "" {
		t.Errorf("groups (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{edge}, mine); diff != "" {
		t.Errorf("this host's groups (-want +got):\n%s", diff)
	}
}

// The split-brain guard sees only the addresses announced on the link.
func TestOnLink(t *testing.T) {
	lbs := []*v1alpha1.LoadBalancer{
		newLB("l2", withAddresses("192.0.2.1")),
		newLB("bgp", withAddresses("192.0.2.2"), withAnnounce(v1alpha1.AnnounceBGP, "")),
	}
	vips := []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")}
	if diff := cmp.Diff(vips[:1], onLink(vips, lbs), cmpopts.EquateComparable(netip.Addr{})); diff != "" {
		t.Errorf("onLink (-want +got):\n%s", diff)
	}
}

// orderLog records what happened, in order.
type orderLog struct {
	mu     sync.Mutex
	events []string
}

func (o *orderLog) add(e string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, e)
}

// withdrawingSpeaker stands for the BGP speaker: when its context ends it
// withdraws, waits a moment as the routers converge, then returns.
type withdrawingSpeaker struct {
	recordingAnnouncer
	log *orderLog
}

func (s *withdrawingSpeaker) Run(ctx context.Context) error {
	<-ctx.Done()
	s.log.add("routes withdrawn")
	time.Sleep(50 * time.Millisecond)
	s.log.add("speaker stopped")
	return nil
}

// cleanupRecorder records when the data plane is removed.
type cleanupRecorder struct {
	recordingDataPlane
	log *orderLog
}

func (c *cleanupRecorder) Cleanup(context.Context) error {
	c.log.add("data plane removed")
	return nil
}

// On a stop the agent keeps its data plane until the speaker has withdrawn
// its routes and waited for the routers: flows keep being forwarded while
// the traffic moves away.
func TestStopWithdrawsBeforeRemovingTheDataPlane(t *testing.T) {
	log := &orderLog{}
	sp := &withdrawingSpeaker{log: log}
	a := testAgent(t, Config{DataPlane: &cleanupRecorder{log: log}, Announcer: sp, BGP: sp})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	waitFor(t, "a first sync", func() bool { return len(a.cfg.DataPlane.(*cleanupRecorder).synced()) > 0 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := []string{"routes withdrawn", "speaker stopped", "data plane removed"}
	if diff := cmp.Diff(want, log.events); diff != "" {
		t.Errorf("order on stop (-want +got):\n%s", diff)
	}
}

// Without fixed labels the host's labels are its own Node's, from the
// agent's Node informer: a label added to that Node makes the host announce
// the pool that selects it, and the label's removal withdraws it; another
// Node's labels do not count.
func TestOwnNodeLabelsSelectPools(t *testing.T) {
	noCheck := func(lb *v1alpha1.LoadBalancer) { lb.Spec.HealthCheck = nil }
	own := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "lb-1"}}
	other := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "lb-2", Labels: map[string]string{"rack": "a"}}}
	kube := kubefake.NewClientset(append(nodeObjects(testNodes()...), own, other)...)
	ann := &recordingAnnouncer{}
	a := testAgent(t, Config{DataPlane: &failingDataPlane{}, Nodes: fakeNodes{kube.CoreV1().Nodes()}, Announcer: ann},
		newLB("ecmp", noCheck, withAddresses("192.0.2.2"), withAnnounce(v1alpha1.AnnounceBGP, "rack=a"), withForwarding(v1alpha1.ForwardingPassthrough)),
	)
	runAgent(t, a)
	waitPrefixes := func(want []string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cmp.Equal(want, ann.prefixes(), cmpopts.EquateEmpty()) {
			if time.Now().After(deadline) {
				t.Fatalf("advertised %v, want %v", ann.prefixes(), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	setLabels := func(l map[string]string) {
		t.Helper()
		n, err := kube.CoreV1().Nodes().Get(t.Context(), "lb-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Labels = l
		if _, err := kube.CoreV1().Nodes().Update(t.Context(), n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitPrefixes(nil)
	setLabels(map[string]string{"rack": "a"})
	waitPrefixes([]string{"192.0.2.2/32"})
	setLabels(map[string]string{"rack": "b"})
	waitPrefixes(nil)
}

// A host advertises only the addresses it forwards to a healthy backend.
func TestOnlyServed(t *testing.T) {
	a, b, c := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("2001:db8::3")
	st := dataplane.State{Services: []dataplane.Service{
		{Name: "ns/ready", VIPs: []netip.Addr{a, c}, Backends: []dataplane.Backend{{Node: "n1"}, {Node: "n2", Healthy: true}}},
		{Name: "ns/new", VIPs: []netip.Addr{b}, Backends: []dataplane.Backend{{Node: "n1"}, {Node: "n2"}}},
	}}
	got := onlyServed([]bgp.Service{{Addrs: []netip.Addr{a, c}, ECMP: true}, {Addrs: []netip.Addr{b}, ECMP: true}}, st)
	want := []bgp.Service{{Addrs: []netip.Addr{a, c}, ECMP: true}}
	if diff := cmp.Diff(want, got, cmpopts.EquateComparable(netip.Addr{})); diff != "" {
		t.Errorf("onlyServed (-want +got):\n%s", diff)
	}
}

// virtual_ips counts the addresses that a host must hold, L2 ones: BGP
// addresses are advertised, never held (virtual_ips_held), so counting them
// made GroundcloudAddressHeldByNoHost (max(virtual_ips) -
// sum(virtual_ips_held) > 0) fire for ever once a Service used a BGP pool.
// BGP has alerts of its own.
func TestVirtualIPsCountsWhatHostsHold(t *testing.T) {
	RegisterMetrics()
	noCheck := func(lb *v1alpha1.LoadBalancer) { lb.Spec.HealthCheck = nil }
	a := testAgent(t, Config{DataPlane: &failingDataPlane{}, Addresses: &recordingAddresses{}, Announcer: &recordingAnnouncer{}, HostLabels: FixedLabels{"rack": "a"}},
		newLB("l2", noCheck, withAddresses("192.0.2.1")),
		newLB("unselected-l2", noCheck, withAddresses("192.0.2.4"), withAnnounce(v1alpha1.AnnounceL2, "rack=b")),
		newLB("ecmp", noCheck, withAddresses("192.0.2.2", "2001:db8::2"), withAnnounce(v1alpha1.AnnounceBGP, "rack=a"), withForwarding(v1alpha1.ForwardingPassthrough)),
		newLB("other-rack", noCheck, withAddresses("192.0.2.3"), withAnnounce(v1alpha1.AnnounceBGP, "rack=b"), withForwarding(v1alpha1.ForwardingPassthrough)),
	)
	startInformer(t, a)
	if err := a.sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := []string{"groundcloud_agent_virtual_ips 2", "groundcloud_agent_virtual_ips_held 1"}
	if diff := cmp.Diff(want, gaugeSamples(t, "groundcloud_agent_virtual_ips", "groundcloud_agent_virtual_ips_held")); diff != "" {
		t.Errorf("gauges (-want +got):\n%s", diff)
	}
}

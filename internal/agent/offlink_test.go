package agent

import (
	"net/netip"
	"strings"
	"sync"
	"testing"

	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics/testutil"
	"sigs.k8s.io/knftables"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/dataplane"
)

// TestOffLinkBackendIsReported: a passthrough LoadBalancer with a node on
// no link of the host's interface gets that node left out of the netdev
// table, one Warning Event, the metric and the NodeNotOnLink condition;
// once the node is on a link, it is programmed and the metric goes.
func TestOffLinkBackendIsReported(t *testing.T) {
	far := func(lb *v1alpha1.LoadBalancer) { lb.Spec.HealthCheck = nil }
	nodes := testNodes(node("node-9", "198.51.100.9"))
	var mu sync.Mutex
	links := []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
	netdev := knftables.NewFake(knftables.NetDevFamily, dataplane.TableName)
	syncer := dataplane.NewSyncer(knftables.NewFake(knftables.IPv4Family, dataplane.TableName), nil, netdev, nil)
	events := record.NewFakeRecorder(10)
	a := testAgent(t, Config{DataPlane: syncer, Nodes: fakeNodes{kubefake.NewClientset(nodeObjects(nodes...)...).CoreV1().Nodes()}, Events: events, Interface: "eth0", Links: func() ([]netip.Prefix, error) {
		mu.Lock()
		defer mu.Unlock()
		return links, nil
	}}, newLB("web", passthrough, far))
	startInformer(t, a)
	RegisterMetrics()

	for range 2 { // the second sync records no second Event
		if err := a.sync(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if dump := netdev.Dump(); strings.Contains(dump, "node-9") || !strings.Contains(dump, "fwd ip to 192.0.2.11") {
		t.Errorf("netdev table forwards to off-link node-9 or not to node-1:\n%s", dump)
	}
	if n := len(events.Events); n != 1 {
		t.Fatalf("%d events, want 1", n)
	}
	if ev := <-events.Events; !strings.Contains(ev, "Warning NodeNotOnLink") || !strings.Contains(ev, "node-9") {
		t.Errorf("event %q, want a NodeNotOnLink warning naming node-9", ev)
	}
	if v, err := testutil.GetGaugeMetricValue(offLinkBackends.WithLabelValues("default/web")); err != nil || v != 1 {
		t.Errorf("passthrough_off_link_backends = %v (%v), want 1", v, err)
	}
	plan := a.plan(t.Context(), []*v1alpha1.LoadBalancer{newLB("web", passthrough, far)}, nodes)
	if _, reason, _ := (hostReport{Programmed: true, Problems: plan.Problems["default/web"]}).outcome(); reason != ReasonNodeNotOnLink {
		t.Errorf("condition reason %s, want %s", reason, ReasonNodeNotOnLink)
	}

	mu.Lock()
	links = append(links, netip.MustParsePrefix("198.51.100.0/24"))
	mu.Unlock()
	if err := a.sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(netdev.Dump(), "fwd ip to 198.51.100.9") {
		t.Errorf("node-9, now on a link, is not forwarded to:\n%s", netdev.Dump())
	}
	if offLinkBackends.DeleteLabelValues("default/web") {
		t.Error("passthrough_off_link_backends still lists default/web")
	}
}

// TestLinksReadOnlyForPassthrough: the interface's prefixes are read
// (a dump of every address, virtual IPs included) only while some
// LoadBalancer forwards in passthrough.
func TestLinksReadOnlyForPassthrough(t *testing.T) {
	reads := 0
	a := &Agent{cfg: Config{Host: "lb-1", Interface: "eth0", Links: func() ([]netip.Prefix, error) {
		reads++
		return []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}, nil
	}}}
	if h := a.host(t.Context(), []*v1alpha1.LoadBalancer{newLB("web"), newLB("db")}); reads != 0 || h.Links != nil {
		t.Errorf("proxy LoadBalancers only: links read %d times (%v), want none", reads, h.Links)
	}
	if h := a.host(t.Context(), []*v1alpha1.LoadBalancer{newLB("web"), newLB("db", passthrough)}); reads != 1 || len(h.Links) != 1 {
		t.Errorf("with a passthrough LoadBalancer: links read %d times (%v), want once", reads, h.Links)
	}
}

// TestBGPAddressOnLinkIsReported: a BGP LoadBalancer with proxy forwarding
// whose address lies in the interface's subnet gets one Warning Event (the
// nodes' replies to the address would look for it with ARP); one whose
// address is outside the subnet, or with passthrough forwarding, none.
func TestBGPAddressOnLinkIsReported(t *testing.T) {
	links := []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
	events := record.NewFakeRecorder(10)
	a := testAgent(t, Config{DataPlane: dataplane.NewSyncer(knftables.NewFake(knftables.IPv4Family, dataplane.TableName), nil, nil, nil),
		Events: events, Interface: "eth0", Links: func() ([]netip.Prefix, error) { return links, nil }},
		newLB("on-link", withAddresses("192.0.2.210"), withAnnounce(v1alpha1.AnnounceBGP, ""), withForwarding(v1alpha1.ForwardingProxy)),
		newLB("routed", withAddresses("198.51.100.10"), withAnnounce(v1alpha1.AnnounceBGP, ""), withForwarding(v1alpha1.ForwardingProxy)),
		newLB("ecmp", withAddresses("192.0.2.211"), withAnnounce(v1alpha1.AnnounceBGP, ""), withForwarding(v1alpha1.ForwardingPassthrough)))
	startInformer(t, a)
	for range 2 { // the second sync records no second Event
		if err := a.sync(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(events.Events); n != 1 {
		t.Fatalf("%d events, want 1", n)
	}
	if ev := <-events.Events; !strings.Contains(ev, "Warning BGPAddressOnLink") || !strings.Contains(ev, "192.0.2.210 (in 192.0.2.0/24)") {
		t.Errorf("event %q", ev)
	}
}

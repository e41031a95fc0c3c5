package agent

import (
	"context"
	"maps"
	"net/netip"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/dataplane"
)

type fakeForgetter struct{ calls [][]netip.Addr }

func (f *fakeForgetter) Forget(_ context.Context, vips []netip.Addr) error {
	f.calls = append(f.calls, vips)
	return nil
}

func TestForgetGained(t *testing.T) {
	v1, v2, v3 := netip.MustParseAddr("192.0.2.200"), netip.MustParseAddr("192.0.2.201"), netip.MustParseAddr("2001:db8::c8")
	f := &fakeForgetter{}
	a := &Agent{cfg: Config{Conntrack: f}}
	ctx := context.Background()
	a.forgetGained(ctx, []netip.Addr{v1, v3}, nil) // first sync: everything is gained
	a.forgetGained(ctx, []netip.Addr{v1, v3}, nil) // nothing new
	a.forgetGained(ctx, []netip.Addr{v3}, nil)     // v1 given away
	a.forgetGained(ctx, []netip.Addr{v1, v2, v3}, nil)
	// Passthrough only: its entries are the host's own kube-proxy's, live.
	v4 := netip.MustParseAddr("192.0.2.202")
	a.forgetGained(ctx, []netip.Addr{v1, v2, v3, v4}, map[netip.Addr]bool{v4: true})
	a.forgetGained(ctx, []netip.Addr{v1, v2, v3}, nil) // v4 given away
	a.forgetGained(ctx, []netip.Addr{v1, v2, v3, v4}, nil)
	want := [][]netip.Addr{{v1, v3}, {v1, v2}, {v4}}
	if diff := cmp.Diff(want, f.calls, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("Forget calls (-want +got):\n%s", diff)
	}
	(&Agent{}).forgetGained(ctx, []netip.Addr{v1}, nil) // no Forgetter: nothing to do
}

// TestPassthroughOnly: an address is left out of forgetGained only when
// every service on it forwards by passthrough.
func TestPassthroughOnly(t *testing.T) {
	pass, proxy, shared := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("2001:db8::3")
	got := passthroughOnly(dataplane.State{Services: []dataplane.Service{
		{Name: "a", VIPs: []netip.Addr{pass, shared}, Forwarding: dataplane.Passthrough},
		{Name: "b", VIPs: []netip.Addr{proxy}, Forwarding: dataplane.Proxy},
		{Name: "c", VIPs: []netip.Addr{shared}, Forwarding: dataplane.Proxy},
	}})
	if want := map[netip.Addr]bool{pass: true}; !maps.Equal(got, want) {
		t.Errorf("passthroughOnly = %v, want %v", got, want)
	}
}

// ownerOf owns the addresses in its set (a Cluster electing this host),
// and releases those in releasing (a drain hand-over).
type ownerOf struct {
	mu        sync.Mutex
	owned     map[netip.Addr]bool
	releasing map[netip.Addr]bool
}

func (o *ownerOf) Releasing(a netip.Addr) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.releasing[a]
}

func (o *ownerOf) Owns(a netip.Addr) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.owned[a]
}

func (o *ownerOf) set(addrs ...netip.Addr) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.owned = map[netip.Addr]bool{}
	for _, a := range addrs {
		o.owned[a] = true
	}
}

// advertisingForgetter records, with each Forget, what the announcer
// advertised at that moment.
type advertisingForgetter struct {
	fakeForgetter
	ann        *recordingAnnouncer
	advertised [][]string
}

func (f *advertisingForgetter) Forget(ctx context.Context, vips []netip.Addr) error {
	f.advertised = append(f.advertised, f.ann.prefixes())
	return f.fakeForgetter.Forget(ctx, vips)
}

// A host forgets the conntrack entries of the addresses it gains, before it
// holds or advertises them: an L2 address it is elected for, and a BGP
// address of proxy forwarding it is elected to advertise (its flows keep
// state on the one host that advertises it). Not the addresses of
// passthrough BGP pools, which every host advertises: this host's
// conntrack holds no state of theirs but its own kube-proxy's, which a
// deletion would lose.
func TestSyncForgetsGainedAddresses(t *testing.T) {
	l2, proxy, ecmp := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.3"), netip.MustParseAddr("192.0.2.4")
	noCheck := func(lb *v1alpha1.LoadBalancer) { lb.Spec.HealthCheck = nil }
	owner := &ownerOf{}
	owner.set(l2, proxy, ecmp)
	ann := &recordingAnnouncer{}
	ct := &advertisingForgetter{ann: ann}
	a := testAgent(t, Config{DataPlane: &failingDataPlane{}, Owner: owner, Announcer: ann, Conntrack: ct},
		newLB("l2", noCheck, withAddresses(l2.String())),
		newLB("bgp-proxy", noCheck, withAddresses(proxy.String()), withAnnounce(v1alpha1.AnnounceBGP, "")),
		newLB("bgp-ecmp", noCheck, withAddresses(ecmp.String()), withAnnounce(v1alpha1.AnnounceBGP, ""), withForwarding(v1alpha1.ForwardingPassthrough)),
	)
	startInformer(t, a)
	sync := func() {
		t.Helper()
		if err := a.sync(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	sync() // everything is gained
	sync() // nothing new
	owner.set(l2)
	sync() // another host is elected for the BGP address
	owner.set(l2, proxy)
	sync() // and this one again
	want := [][]netip.Addr{{l2, proxy}, {proxy}}
	if diff := cmp.Diff(want, ct.calls, cmpopts.EquateComparable(netip.Addr{})); diff != "" {
		t.Errorf("Forget calls (-want +got):\n%s", diff)
	}
	// Forgotten before they are advertised: the first sync advertised
	// nothing yet, the last one only what it kept.
	wantAdvertised := [][]string{nil, {"192.0.2.4/32"}}
	if diff := cmp.Diff(wantAdvertised, ct.advertised, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("advertised at each Forget (-want +got):\n%s", diff)
	}
}

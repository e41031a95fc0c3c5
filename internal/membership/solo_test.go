package membership

import (
	"context"
	"errors"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"
)

// TestSolo: a lone host owns every address whatever its state and
// whatever other hosts the API names and the link hears, but a fresh one
// only once its probe cleared it; nobody succeeds it, cordoned it releases
// nothing, it reports no gossip trouble, and its Status says Solo.
func TestSolo(t *testing.T) {
	o := NewOptions()
	o.HoldDown = 0
	g := New(o.SoloConfig("lb-1", "lo"))
	g.linkState = func(string) (bool, error) { return true, nil }
	fresh, old := netip.MustParseAddr("192.0.2.20"), netip.MustParseAddr("192.0.2.21")
	// Another host the API names and the guard heard claiming an address
	// from its MAC: for a member, a Ready peer it never gossiped with.
	other := []Host{{Name: "lb-2", Addr: "192.0.2.2:7947", MAC: "02:00:00:00:00:02"}}
	g.mu.Lock()
	g.joined = true
	g.heard["02:00:00:00:00:02"] = time.Now()
	g.mu.Unlock()
	// Unhealthy (no node answers, the data plane failed).
	g.Observe(Observation{
		VIPs: []netip.Addr{fresh, old}, NodesReachable: false, DataPlaneErr: errors.New("nft failed"),
		Fresh: map[netip.Addr]bool{fresh: true}, Hosts: other, Peers: []string{"192.0.2.2:7947"},
	})
	if !g.Owns(old) {
		t.Error("a lone host does not own an address held before")
	}
	if g.Owns(fresh) {
		t.Error("a lone host owns a fresh address before its probe")
	}
	probesUnanswered(g)
	if !g.Owns(fresh) {
		t.Error("a fresh address not owned after its probes went unanswered")
	}
	// Healthy and Ready, then cordoned.
	for _, draining := range []bool{false, true} {
		g.Observe(Observation{VIPs: []netip.Addr{fresh, old}, NodesReachable: true, Draining: draining, Hosts: other})
		if st := g.Status(); st.State == StateStarting || st.State == StateHoldDown {
			t.Fatalf("state %s, want Ready or Draining", st.State)
		}
		for _, v := range []netip.Addr{fresh, old} {
			if s := g.Successor(v, true); s != "" {
				t.Errorf("draining %v: Successor(%s) = %q, want none", draining, v, s)
			}
			if name, addr := g.Holder(v); name != "lb-1" || addr.IsValid() {
				t.Errorf("draining %v: Holder(%s) = %s %s, want lb-1 itself", draining, v, name, addr)
			}
			if g.Releasing(v) || !g.Owns(v) {
				t.Errorf("draining %v: %s released, or not owned", draining, v)
			}
		}
	}
	if st := g.Status(); !st.Solo || st.Address != "" || st.Gossip.Reason != GossipHealthy {
		t.Errorf("Status = %+v, want Solo, healthy, without a gossip address", st)
	}
}

// TestSoloWithoutEthernet: on an interface without an Ethernet address
// (lo here) nothing can be probed: Run holds a fresh address at once and
// asks for the sync that holds it. It opens no gossip socket.
func TestSoloWithoutEthernet(t *testing.T) {
	g := New(NewOptions().SoloConfig("lb-1", "lo"))
	g.linkState = func(string) (bool, error) { return true, nil }
	fresh := netip.MustParseAddr("192.0.2.20")
	g.Observe(Observation{VIPs: []netip.Addr{fresh}, NodesReachable: true, Fresh: map[netip.Addr]bool{fresh: true}})
	if g.Owns(fresh) {
		t.Fatal("owned before Run found it cannot probe")
	}
	var syncs atomic.Int32
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- g.Run(ctx, Hooks{Sync: func(bool) { syncs.Add(1) }, Announce: func() {}}) }()
	waitFor(t, "the fresh address owned", 5*time.Second, func() error {
		if !g.Owns(fresh) || syncs.Load() == 0 {
			return errors.New("not owned, or no sync asked for")
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

// TestMemberWithoutEthernetHoldsFreshAddresses: a gossiping member on an
// interface without an Ethernet address cannot probe either: a fresh
// address is held once it is Ready, not left waiting for a probe.
func TestMemberWithoutEthernetHoldsFreshAddresses(t *testing.T) {
	if testing.Short() {
		t.Skip("opens gossip sockets")
	}
	o := NewOptions()
	port := freePort(t)
	g := New(Config{
		Name: "lb-1", Interface: "lo", BindHost: "127.0.0.1", BindPort: port,
		Key:           []byte("0123456789abcdef0123456789abcdef"),
		ProbeInterval: o.ProbeInterval, ProbeTimeout: o.ProbeTimeout, SuspicionMult: o.SuspicionMult,
		ConflictProbeInterval: time.Second, AddressProbes: 3, AddressProbeSpacing: 100 * time.Millisecond,
	})
	fresh := netip.MustParseAddr("192.0.2.20")
	observe := func() { // as every sync does
		g.Observe(Observation{VIPs: []netip.Addr{fresh}, NodesReachable: true, Fresh: map[netip.Addr]bool{fresh: true}})
	}
	observe()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- g.Run(ctx, Hooks{Sync: func(bool) {}, Announce: func() {}}) }()
	waitFor(t, "Ready", 10*time.Second, wantState(&testMember{Gossip: g}, StateReady))
	observe()
	waitFor(t, "the fresh address owned", 5*time.Second, func() error {
		observe()
		if !g.Owns(fresh) {
			return errors.New("not owned")
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

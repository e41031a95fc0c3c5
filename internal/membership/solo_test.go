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
// whatever other hosts the API names, but a fresh one only once its probe
// cleared it; nobody succeeds it, and its Status says Solo.
func TestSolo(t *testing.T) {
	o := NewOptions()
	o.HoldDown = 0
	g := New(o.SoloConfig("lb-1", "lo"))
	g.linkState = func(string) (bool, error) { return true, nil }
	fresh, old := netip.MustParseAddr("192.0.2.20"), netip.MustParseAddr("192.0.2.21")
	// Unhealthy (no node answers, the data plane failed), with another
	// host in the API that it could hand addresses to if it gossiped.
	g.Observe(Observation{
		VIPs: []netip.Addr{fresh, old}, NodesReachable: false, DataPlaneErr: errors.New("nft failed"),
		Fresh: map[netip.Addr]bool{fresh: true},
		Hosts: []Host{{Name: "lb-2", Addr: "192.0.2.2:7947", MAC: "02:00:00:00:00:02"}}, Peers: []string{"192.0.2.2:7947"},
	})
	if !g.Owns(old) {
		t.Error("a lone host does not own an address held before")
	}
	if g.Owns(fresh) {
		t.Error("a lone host owns a fresh address before its probe")
	}
	for _, v := range []netip.Addr{fresh, old} {
		if s := g.Successor(v, true); s != "" {
			t.Errorf("Successor(%s) = %q, want none", v, s)
		}
		if name, addr := g.Holder(v); name != "lb-1" || addr.IsValid() {
			t.Errorf("Holder(%s) = %s %s, want lb-1 itself", v, name, addr)
		}
	}
	if st := g.Status(); !st.Solo || st.Address != "" {
		t.Errorf("Status = %+v, want Solo without a gossip address", st)
	}
	probesUnanswered(g)
	if !g.Owns(fresh) {
		t.Error("a fresh address not owned after its probes went unanswered")
	}
	// Cordoned, Ready, with a Ready host it would hand its addresses to if
	// it gossiped, it still releases none.
	g.mu.Lock()
	g.joined = true
	g.peers["lb-2"] = Member{Name: "lb-2", State: StateReady}
	g.mu.Unlock()
	g.Observe(Observation{VIPs: []netip.Addr{fresh, old}, NodesReachable: true})
	g.Observe(Observation{VIPs: []netip.Addr{fresh, old}, NodesReachable: true, Draining: true,
		Hosts: []Host{{Name: "lb-2", Addr: "192.0.2.2:7947", MAC: "02:00:00:00:00:02"}}})
	if g.Releasing(old) || !g.Owns(old) {
		t.Error("a cordoned lone host releases an address")
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

package membership

import (
	"net/netip"
	"testing"
	"time"
)

// TestHandBack: when another member becomes Ready (a take-back after its
// hold-down, an uncordon), this host goes on holding, quiet (Releasing),
// the link addresses that member now owns for a hand-over, so that the
// member adds them before this host removes them; then it lets them go.
// Only what it held: not an address it yielded in a split brain, nor
// one advertised over BGP (two advertisers would split its flows at the
// router).
func TestHandBack(t *testing.T) {
	var vips []netip.Addr
	for i := range 16 {
		vips = append(vips, netip.AddrFrom4([4]byte{192, 0, 2, byte(10 + i)}))
	}
	advertised := netip.MustParseAddr("192.0.2.100")
	all := append([]netip.Addr{advertised}, vips...)
	now := time.Now()
	a := bgpMember("lb-a", 0, []netip.Addr{advertised}, Member{Name: "lb-b", State: StateHoldDown})
	a.obs.Sessions = []string{"ipv4"}
	a.obs.VIPs = all
	a.vips = map[netip.Addr]bool{}
	for _, v := range all {
		a.vips[v] = true
	}
	eval := func(at time.Time) bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.evaluate(at)
	}
	eval(now)
	eval(now.Add(time.Minute)) // its BGP family ready (hold-down 0)
	if got := owned(a, all); got != len(all) {
		t.Fatalf("alone lb-a owns %d of %d", got, len(all))
	}
	for _, v := range all {
		if a.Releasing(v) {
			t.Fatalf("alone lb-a releases %s", v)
		}
	}

	// lb-b becomes Ready (and may advertise the BGP address).
	at := now.Add(2 * time.Minute)
	b := bgpMember("lb-b", 0, []netip.Addr{advertised}, Member{Name: "lb-a", State: StateReady, BGP: []string{"ipv4"}})
	b.obs.Sessions = []string{"ipv4"}
	b.mu.Lock()
	b.evaluate(at)
	b.evaluate(at.Add(time.Minute))
	b.mu.Unlock()
	// One of lb-b's addresses lb-a did not hold then (it yielded it in a
	// split brain): nothing to hand back, even once it no longer yields.
	var yielded netip.Addr
	for _, v := range vips {
		if b.Owns(v) {
			yielded = v
			break
		}
	}
	a.suppressed[yielded] = true
	a.peers["lb-b"] = Member{Name: "lb-b", State: StateReady, BGP: []string{"ipv4"}}
	if !eval(at) {
		t.Error("a newcomer changed nothing")
	}
	delete(a.suppressed, yielded)
	if a.Owns(yielded) || a.Releasing(yielded) {
		t.Errorf("lb-a owns %s %v, releasing %v, which it did not hold when lb-b came; want neither", yielded, a.Owns(yielded), a.Releasing(yielded))
	}
	handed := 0
	for _, v := range vips {
		switch {
		case v == yielded:
		case b.Owns(v) && (!a.Owns(v) || !a.Releasing(v)):
			t.Errorf("during the hand-back lb-a owns %s %v, releasing %v; want both, it is lb-b's now", v, a.Owns(v), a.Releasing(v))
		case !b.Owns(v) && (!a.Owns(v) || a.Releasing(v)):
			t.Errorf("lb-a owns its own %s %v, releasing %v; want it owned, not released", v, a.Owns(v), a.Releasing(v))
		}
		if b.Owns(v) {
			handed++
		}
	}
	if handed == 0 || handed == len(vips) {
		t.Fatalf("lb-b owns %d of %d link addresses: the test needs a share", handed, len(vips))
	}
	if a.Owns(advertised) == b.Owns(advertised) {
		t.Errorf("the BGP address: lb-a owns %v, lb-b %v; want exactly one advertiser", a.Owns(advertised), b.Owns(advertised))
	}
	if w := a.wake(); !w.Equal(at.Add(handOver)) {
		t.Errorf("wake %v, want the end of the hand-back %v", w, at.Add(handOver))
	}

	// The hand-over ends: a change, and lb-a holds its share only.
	if !eval(at.Add(handOver)) {
		t.Error("the end of the hand-back changed nothing")
	}
	for _, v := range vips {
		if a.Owns(v) == b.Owns(v) || a.Releasing(v) {
			t.Errorf("after the hand-back %s: lb-a owns %v (releasing %v), lb-b %v; want one owner, none releasing", v, a.Owns(v), a.Releasing(v), b.Owns(v))
		}
	}
	if !a.wake().IsZero() {
		t.Errorf("wake %v after the hand-back, want none", a.wake())
	}
}

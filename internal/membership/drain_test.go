package membership

import (
	"net/netip"
	"testing"
	"time"
)

// TestDrain: a host whose Node is cordoned publishes Draining at once and,
// a hand-over later, yields its addresses to the Ready members, which own
// them as soon as they see it Draining; it keeps those no Ready member
// may hold (another host group, or no other host at all); during the
// hand-over it releases what it hands over (Releasing: held, not
// announced); uncordoned, it is Ready again and takes its share back.
func TestDrain(t *testing.T) {
	const edge = "example.net/edge=true"
	var vips []netip.Addr
	for i := range 16 {
		vips = append(vips, netip.AddrFrom4([4]byte{192, 0, 2, byte(10 + i)}))
	}
	edgeVIP := netip.MustParseAddr("192.0.2.100")
	now := time.Now()
	a := bgpMember("lb-a", 0, nil, Member{Name: "lb-b", State: StateReady, Groups: []string{}})
	a.obs.Groups = map[netip.Addr]string{edgeVIP: edge}
	a.obs.MyGroups = []string{edge}
	eval := func(g *Gossip, at time.Time) {
		g.mu.Lock()
		g.evaluate(at)
		g.mu.Unlock()
	}
	eval(a, now)
	before := owned(a, vips)
	if before == 0 || before == len(vips) {
		t.Fatalf("lb-a owns %d of %d addresses beside lb-b: the test needs a share", before, len(vips))
	}

	a.obs.Draining = true
	eval(a, now)
	if st := a.Status().State; st != StateDraining {
		t.Fatalf("cordoned: state %s, want Draining", st)
	}
	if got := owned(a, vips); got != before {
		t.Errorf("during the hand-over lb-a owns %d, want still %d", got, before)
	}
	// What it owns then, it releases: held, but neither announced nor
	// defended; not the address of its group, which lb-b may not hold.
	for _, v := range vips {
		if a.Owns(v) && !a.Releasing(v) {
			t.Errorf("during the hand-over lb-a owns %s without releasing it", v)
		}
		if !a.Owns(v) && a.Releasing(v) {
			t.Errorf("lb-a releases %s, which it does not own", v)
		}
	}
	if a.Releasing(edgeVIP) {
		t.Error("lb-a releases an address of its group, which lb-b may not hold")
	}
	if w := a.wake(); !w.Equal(now.Add(handOver)) {
		t.Errorf("wake %v, want the end of the hand-over %v", w, now.Add(handOver))
	}
	eval(a, now.Add(handOver))
	if got := owned(a, vips); got != 0 {
		t.Errorf("after the hand-over lb-a owns %d addresses, want none (lb-b is Ready)", got)
	}
	if !a.Owns(edgeVIP) || a.Releasing(edgeVIP) {
		t.Error("lb-a gave up an address of its group, which lb-b may not hold")
	}
	if !a.wake().IsZero() {
		t.Errorf("wake %v after the hand-over, want none", a.wake())
	}

	// lb-b hears lb-a Draining: it owns everything it may.
	b := bgpMember("lb-b", 0, nil, Member{Name: "lb-a", State: StateDraining, Groups: []string{edge}})
	b.obs.Groups = map[netip.Addr]string{edgeVIP: edge}
	eval(b, now)
	if got := owned(b, vips); got != len(vips) {
		t.Errorf("lb-b owns %d of %d beside a draining lb-a, want all", got, len(vips))
	}
	if b.Owns(edgeVIP) {
		t.Error("lb-b owns an address of a group it is not in")
	}

	// Alone, a draining host keeps serving.
	solo := bgpMember("lb-a", 0, nil)
	solo.obs.Draining = true
	eval(solo, now)
	eval(solo, now.Add(handOver))
	if got := owned(solo, vips); got != len(vips) {
		t.Errorf("a draining host alone owns %d of %d, want all", got, len(vips))
	}
	if solo.Releasing(vips[0]) {
		t.Error("a draining host alone releases what nobody else may hold")
	}

	// A host that becomes Ready while cordoned (restarted during the
	// maintenance) takes nothing, not even for a hand-over.
	back := bgpMember("lb-a", time.Minute, nil, Member{Name: "lb-b", State: StateReady, Groups: []string{}})
	back.obs.Draining = true
	eval(back, now)
	if st := back.Status().State; st != StateHoldDown {
		t.Fatalf("restarted beside a serving lb-b: %s, want HoldDown", st)
	}
	eval(back, now.Add(time.Minute))
	if st := back.Status().State; st != StateDraining {
		t.Fatalf("after its hold-down while cordoned: %s, want Draining", st)
	}
	if got := owned(back, vips); got != 0 {
		t.Errorf("a host Ready while cordoned owns %d addresses, want none", got)
	}

	// Uncordoned: Ready, its share back.
	a.obs.Draining = false
	eval(a, now.Add(2*handOver))
	if st := a.Status().State; st != StateReady {
		t.Errorf("uncordoned: state %s, want Ready", st)
	}
	if got := owned(a, vips); got != before {
		t.Errorf("uncordoned lb-a owns %d, want its share %d again", got, before)
	}
	for _, v := range vips {
		if a.Releasing(v) {
			t.Errorf("uncordoned lb-a releases %s", v)
		}
	}
}

package membership

import (
	"net/netip"
	"slices"
	"testing"
	"time"
)

// TestProbes runs the probe of new addresses on a fake clock: three
// probes 200 ms apart, held 200 ms after the last when none was answered;
// an answer keeps the address unheld and in use, probed once a second,
// until the other station has been silent for three seconds.
func TestProbes(t *testing.T) {
	free, taken := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("192.0.2.11")
	p := newProbes(3, 200*time.Millisecond, time.Second)
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	p.track([]netip.Addr{free, taken})
	for _, v := range []netip.Addr{free, taken} {
		if !p.blocked(v) {
			t.Fatalf("%s held before any probe", v)
		}
	}
	step := func(ms int, wantSend []netip.Addr, wantCleared bool) {
		t.Helper()
		send, cleared := p.due(at(ms))
		if !slices.Equal(send, wantSend) || cleared != wantCleared {
			t.Fatalf("at %d ms: due = %v, cleared %v; want %v, %v", ms, send, cleared, wantSend, wantCleared)
		}
	}
	both := []netip.Addr{free, taken}
	if !p.pending() {
		t.Fatal("nothing pending with two addresses to probe")
	}
	step(0, both, false)
	step(100, nil, false) // too soon
	step(200, both, false)
	p.seen(taken, "02:00:00:00:00:99", at(250))
	step(400, []netip.Addr{free}, false) // taken waits a recheck interval now
	step(600, nil, true)                 // free: three unanswered probes
	if p.blocked(free) {
		t.Fatal("free still blocked after three unanswered probes")
	}
	if !p.blocked(taken) {
		t.Fatal("taken not blocked though a station answered")
	}
	u := p.inUse(at(600))
	if got := u[taken]; got.MAC != "02:00:00:00:00:99" || !got.Since.Equal(at(250)) || got.Announced || len(u) != 1 {
		t.Fatalf("inUse = %+v", u)
	}
	if ch := p.changes(u); len(ch) != 1 || ch[0].VIP != taken || ch[0].Ended {
		t.Fatalf("changes = %+v, want taken started", ch)
	}
	if ch := p.changes(u); len(ch) != 0 {
		t.Fatalf("changes repeated: %+v", ch)
	}
	// A claim of an address already held is the split-brain guard's: it
	// does not block it again (no flapping).
	p.seen(free, "02:00:00:00:00:98", at(700))
	if p.blocked(free) {
		t.Fatal("a claim after the address was held blocked it again")
	}
	step(1250, []netip.Addr{taken}, false)
	p.seen(taken, "02:00:00:00:00:99", at(1260)) // still there
	step(2260, []netip.Addr{taken}, false)
	step(3260, []netip.Addr{taken}, false)
	step(4260, []netip.Addr{taken}, false) // silent since 1260: in use until 4260
	if !p.blocked(taken) {
		t.Fatal("taken unblocked while its claim is recent")
	}
	if !p.pending() {
		t.Fatal("nothing pending while taken is in use")
	}
	step(4470, nil, true) // silent for more than 3 s, three probes since: held
	if p.blocked(taken) {
		t.Fatal("taken still blocked after the station went silent")
	}
	if p.pending() {
		t.Fatal("pending with every address cleared: the probe rounds would tick for nothing")
	}
	if ch := p.changes(p.inUse(at(4470))); len(ch) != 1 || !ch[0].Ended || ch[0].VIP != taken {
		t.Fatalf("changes = %+v, want taken ended", ch)
	}
	// Addresses no longer fresh or owned are dropped; a new one starts over.
	p.track([]netip.Addr{netip.MustParseAddr("192.0.2.12")})
	if p.blocked(free) || p.blocked(taken) || !p.blocked(netip.MustParseAddr("192.0.2.12")) {
		t.Fatal("track did not follow the new set")
	}
	if !p.pending() {
		t.Fatal("a new address tracked, nothing pending")
	}
}

// TestProbesDisabled: without probes nothing is blocked.
func TestProbesDisabled(t *testing.T) {
	var p *probes
	if p.blocked(netip.MustParseAddr("192.0.2.1")) {
		t.Fatal("nil probes block")
	}
	q := newProbes(0, time.Second, time.Second)
	q.track([]netip.Addr{netip.MustParseAddr("192.0.2.1")})
	if q.blocked(netip.MustParseAddr("192.0.2.1")) {
		t.Fatal("zero probes block")
	}
	if p.pending() || q.pending() {
		t.Fatal("probes pending while disabled")
	}
}

// TestOwnsWaitsForTheProbe: a fresh address this host owns is not owned
// until the probe clears it; one some host held before is owned at once.
func TestOwnsWaitsForTheProbe(t *testing.T) {
	g := New(Config{Name: "a", Interface: "lo", ConflictProbeInterval: time.Second, AddressProbes: 3, AddressProbeSpacing: 200 * time.Millisecond})
	g.linkState = func(string) (bool, error) { return true, nil }
	fresh, old := netip.MustParseAddr("192.0.2.20"), netip.MustParseAddr("192.0.2.21")
	g.Observe(Observation{VIPs: []netip.Addr{fresh, old}, NodesReachable: true, Fresh: map[netip.Addr]bool{fresh: true}})
	g.mu.Lock()
	g.ready.state = StateReady
	g.cands = []string{"a"}
	g.trackProbes()
	g.mu.Unlock()
	if !g.Owns(old) {
		t.Fatal("an address held before waits for a probe")
	}
	if g.Owns(fresh) {
		t.Fatal("a fresh address owned before its probe")
	}
	probesUnanswered(g)
	if !g.Owns(fresh) {
		t.Fatal("a fresh address not owned after its probes went unanswered")
	}
}

// probesUnanswered runs g's probes of its fresh addresses to the end, a
// second apart, without an answer.
func probesUnanswered(g *Gossip) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := range 4 {
		g.probes.due(time.Now().Add(time.Duration(i) * time.Second))
	}
}

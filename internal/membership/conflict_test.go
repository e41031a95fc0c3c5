package membership

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestConflicts(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	v := netip.MustParseAddr("192.0.2.200")
	const macA, macB, stranger = "02:00:00:00:00:0a", "02:00:00:00:00:0b", "02:00:00:00:00:ee"
	// Which of lb-a and lb-b wins v decides the partition tests.
	winner := Owner(v, []string{"lb-a", "lb-b"})
	loser, loserMAC, winnerMAC := "lb-b", macB, macA
	if winner == "lb-b" {
		loser, loserMAC, winnerMAC = "lb-a", macA, macB
	}
	hostOf := map[string]string{macA: "lb-a", macB: "lb-b"}
	type decision struct {
		at      time.Duration
		action  Action
		changed bool
	}
	tests := []struct {
		name      string
		self      string
		alive     map[string]bool
		sightings []sighting
		decisions []decision
	}{
		{
			name: "a kernel left by a killed agent: defend, once confirmed; ends when it stops",
			self: winner,
			sightings: []sighting{
				{v, loserMAC, false, at(0)},
				{v, loserMAC, false, at(time.Second)},
			},
			decisions: []decision{
				{100 * time.Millisecond, ActionNone, false}, // one sighting: a handover, perhaps
				{time.Second, ActionDefend, true},
				{2 * time.Second, ActionDefend, false},
				{5 * time.Second, ActionNone, true},
			},
		},
		{
			name: "partition, this host loses the pair's hash: yield while the other claims",
			self: loser,
			sightings: []sighting{
				{v, winnerMAC, true, at(0)},
				{v, winnerMAC, true, at(time.Second)},
			},
			decisions: []decision{
				{time.Second, ActionYield, true},
				{4 * time.Second, ActionYield, false},
				{4100 * time.Millisecond, ActionNone, true},
			},
		},
		{
			name: "partition, this host wins: defend",
			self: winner,
			sightings: []sighting{
				{v, loserMAC, true, at(0)},
				{v, loserMAC, true, at(time.Second)},
			},
			decisions: []decision{{time.Second, ActionDefend, true}},
		},
		{
			name:  "the other is a live member: a handover, never yield",
			self:  loser,
			alive: map[string]bool{winner: true},
			sightings: []sighting{
				{v, winnerMAC, true, at(0)},
				{v, winnerMAC, true, at(time.Second)},
			},
			decisions: []decision{{time.Second, ActionDefend, true}},
		},
		{
			// IPv6: the winner's kernel answers this host's DAD probes
			// (passive, its MAC); the winner's own DAD probes carry no MAC.
			name: "partition over IPv6, this host loses: probes without a MAC are the winner's; yield while they come",
			self: loser,
			sightings: []sighting{
				{v, winnerMAC, false, at(0)},
				{v, "", true, at(500 * time.Millisecond)},
				{v, winnerMAC, false, at(time.Second)},
				// Yielded: this host no longer probes, only the winner's probes come.
				{v, "", true, at(2 * time.Second)},
				{v, "", true, at(3 * time.Second)},
				{v, "", true, at(4 * time.Second)},
				{v, "", true, at(5 * time.Second)},
			},
			decisions: []decision{
				{time.Second, ActionYield, true},
				{5 * time.Second, ActionYield, false},
				{8100 * time.Millisecond, ActionNone, true},
			},
		},
		{
			name: "IPv6 probes without a MAC and nothing else seen: nothing to decide",
			self: loser,
			sightings: []sighting{
				{v, "", true, at(0)},
				{v, "", true, at(time.Second)},
				{v, "", true, at(2 * time.Second)},
			},
			decisions: []decision{{time.Second, ActionNone, false}, {2 * time.Second, ActionNone, false}},
		},
		{
			name: "IPv6 probes while two stations answer: attributed to neither, defend",
			self: loser,
			sightings: []sighting{
				{v, winnerMAC, false, at(0)},
				{v, stranger, false, at(0)},
				{v, "", true, at(500 * time.Millisecond)},
				{v, winnerMAC, false, at(time.Second)},
				{v, stranger, false, at(time.Second)},
				{v, "", true, at(1500 * time.Millisecond)},
			},
			decisions: []decision{{time.Second, ActionDefend, true}, {2 * time.Second, ActionDefend, false}},
		},
		{
			name: "an IPv6 probe does not revive a station gone longer than the window",
			self: loser,
			sightings: []sighting{
				{v, winnerMAC, false, at(0)},
				{v, winnerMAC, false, at(time.Second)},
				{v, "", true, at(4500 * time.Millisecond)},
			},
			decisions: []decision{
				{time.Second, ActionDefend, true},
				{4500 * time.Millisecond, ActionNone, true},
			},
		},
		{
			name: "a stranger claims it: defend, never yield",
			self: loser,
			sightings: []sighting{
				{v, stranger, true, at(0)},
				{v, stranger, true, at(time.Second)},
			},
			decisions: []decision{{time.Second, ActionDefend, true}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newConflicts(time.Second)
			view := peerView{self: tt.self, hostOf: hostOf, alive: tt.alive}
			c.decide(at(-time.Second), []netip.Addr{v}, view) // this host wants v from here on
			next := 0
			for i, d := range tt.decisions {
				for next < len(tt.sightings) && !tt.sightings[next].At.After(at(d.at)) {
					c.observe(tt.sightings[next])
					next++
				}
				actions, changes := c.decide(at(d.at), []netip.Addr{v}, view)
				if actions[v] != d.action {
					t.Errorf("decision %d at %s: action %q, want %q", i, d.at, actions[v], d.action)
				}
				if (len(changes) > 0) != d.changed {
					t.Errorf("decision %d at %s: changes %+v, want changed=%v", i, d.at, changes, d.changed)
				}
			}
		})
	}
}

func TestConflictsIgnoreUnwanted(t *testing.T) {
	c := newConflicts(time.Second)
	v := netip.MustParseAddr("192.0.2.200")
	t0 := time.Unix(0, 0)
	c.observe(sighting{v, "02:00:00:00:00:01", false, t0})
	c.observe(sighting{v, "02:00:00:00:00:01", false, t0.Add(time.Second)})
	actions, changes := c.decide(t0.Add(time.Second), nil, peerView{self: "lb-1"})
	if len(actions) != 0 || len(changes) != 0 {
		t.Errorf("an address this host does not want: %v %v", actions, changes)
	}
	// Once wanted, what was seen before does not count: that was the
	// previous owner, rightly (a handover).
	if actions, changes = c.decide(t0.Add(time.Second), []netip.Addr{v}, peerView{self: "lb-1"}); len(actions) != 0 || len(changes) != 0 {
		t.Errorf("evidence from before the address was wanted counts: %v %v", actions, changes)
	}
	c.observe(sighting{v, "02:00:00:00:00:01", false, t0.Add(2 * time.Second)})
	if _, changes = c.decide(t0.Add(2*time.Second), []netip.Addr{v}, peerView{self: "lb-1"}); len(changes) != 0 {
		t.Errorf("one sighting is a conflict: %+v", changes)
	}
	c.observe(sighting{v, "02:00:00:00:00:01", false, t0.Add(3 * time.Second)})
	actions, changes = c.decide(t0.Add(3*time.Second), []netip.Addr{v}, peerView{self: "lb-1"})
	want := []Conflict{{VIP: v, MAC: "02:00:00:00:00:01", Action: ActionDefend}}
	if actions[v] != ActionDefend || !cmp.Equal(changes, want, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })) {
		t.Errorf("wanted: %v %+v", actions, changes)
	}
}

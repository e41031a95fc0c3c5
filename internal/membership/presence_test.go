package membership

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestLinkPeers(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const window = 3 * time.Second
	const macB, macC = "02:00:00:00:00:0b", "02:00:00:00:00:0c"
	api := map[string]string{macB: "lb-b", macC: "lb-c", "02:00:00:00:00:0a": "lb-a"}
	tests := []struct {
		name     string
		heard    map[string]time.Time
		alive    map[string]Member
		gossiped map[string]bool
		want     []string
	}{
		{name: "nothing heard: nobody counts"},
		{
			name:  "heard within the window: a Ready member",
			heard: map[string]time.Time{macB: t0.Add(-time.Second)},
			want:  []string{"lb-b"},
		},
		{
			name:  "heard too long ago: gone (its agent died or its link is down)",
			heard: map[string]time.Time{macB: t0.Add(-window - time.Millisecond)},
		},
		{
			name:  "a gossip member is judged by gossip",
			heard: map[string]time.Time{macB: t0, macC: t0},
			alive: map[string]Member{"lb-b": {Name: "lb-b", State: StateHoldDown}},
			want:  []string{"lb-c"},
		},
		{
			name:     "once seen in gossip: failure detection decides, not the link",
			heard:    map[string]time.Time{macB: t0, macC: t0},
			gossiped: map[string]bool{"lb-c": true},
			want:     []string{"lb-b"},
		},
		{
			name:  "this host's own MAC never counts",
			heard: map[string]time.Time{"02:00:00:00:00:0a": t0},
		},
		{
			name:  "a MAC the API does not name counts for nobody",
			heard: map[string]time.Time{"02:00:00:00:00:ee": t0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, m := range linkPeers(t0, window, "lb-a", api, tt.heard, tt.alive, tt.gossiped) {
				if m.State != StateReady {
					t.Errorf("%s is %s, want Ready", m.Name, m.State)
				}
				if m.Groups == nil || len(m.Groups) > 0 {
					t.Errorf("%s is in groups %#v, want none (not every one: nil)", m.Name, m.Groups)
				}
				if m.BGP == nil || len(m.BGP) > 0 {
					t.Errorf("%s may advertise BGP families %#v, want none (not every one: nil)", m.Name, m.BGP)
				}
				got = append(got, m.Name)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("link peers (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNeverGossipedHostsShareTheAddresses: two hosts that never gossiped,
// each seeing the other from the API and on the link, compute the same
// owners, each address owned by exactly one of them; before, each was
// alone and owned everything.
func TestNeverGossipedHostsShareTheAddresses(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const macA, macB = "02:00:00:00:00:0a", "02:00:00:00:00:0b"
	api := map[string]string{macA: "lb-a", macB: "lb-b"}
	heard := map[string]time.Time{macA: t0, macB: t0}
	view := func(self string) []string {
		return candidates(self, StateReady, linkPeers(t0, 3*time.Second, self, api, heard, nil, nil))
	}
	a, b := view("lb-a"), view("lb-b")
	if diff := cmp.Diff([]string{"lb-a", "lb-b"}, a); diff != "" {
		t.Fatalf("candidates of lb-a (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(a, b); diff != "" {
		t.Fatalf("the hosts disagree on the candidates (-lb-a +lb-b):\n%s", diff)
	}
	owned := map[string]int{}
	for _, v := range vips(20) {
		owned[Owner(v, a)]++
	}
	if owned["lb-a"] == 0 || owned["lb-b"] == 0 {
		t.Errorf("owners %v, want both hosts to own some", owned)
	}
}

// TestGuardNamesHostsFromTheAPI: a host that never gossiped claims an
// address this host wants. Named from its published MAC, the pair's
// rendezvous hash decides on both sides (one yields, one defends) instead
// of both defending forever.
func TestGuardNamesHostsFromTheAPI(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const macA, macB = "02:00:00:00:00:0a", "02:00:00:00:00:0b"
	api := map[string]string{macA: "lb-a", macB: "lb-b"}
	v := netip.MustParseAddr("192.0.2.200")
	actions := map[string]Action{}
	for self, other := range map[string]string{macA: macB, macB: macA} {
		name := api[self]
		c := newConflicts(time.Second)
		c.decide(t0, []netip.Addr{v}, peerView{self: name})
		c.observe(sighting{VIP: v, MAC: other, Active: true, At: t0})
		c.observe(sighting{VIP: v, MAC: other, Active: true, At: t0.Add(time.Second)})
		got, _ := c.decide(t0.Add(time.Second), []netip.Addr{v}, peerView{self: name, hostOf: hostsByMAC(nil, api)})
		actions[name] = got[v]
	}
	winner := Owner(v, []string{"lb-a", "lb-b"})
	loser := "lb-a"
	if winner == "lb-a" {
		loser = "lb-b"
	}
	want := map[string]Action{winner: ActionDefend, loser: ActionYield}
	if diff := cmp.Diff(want, actions); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
}

func TestHostsByMAC(t *testing.T) {
	got := hostsByMAC(map[string]string{"m1": "gossip-1"}, map[string]string{"m1": "api-1", "m2": "api-2"})
	if diff := cmp.Diff(map[string]string{"m1": "gossip-1", "m2": "api-2"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestLinkOnlyHostOwnsNoGroupAddress: with gossip broken, a host heard
// only on the link publishes no groups, so its groups are unknown. A
// selected host must not yield the addresses of its group to it: when
// that host is outside the group (lb-b, not an edge host) it never holds
// them, and they would be held by no host. It counts for the addresses
// that every host serves only.
func TestLinkOnlyHostOwnsNoGroupAddress(t *testing.T) {
	const macB = "02:00:00:00:00:0b"
	edge := Group("example.net/edge=true")
	g := New(Config{Name: "lb-a", Interface: "lo", ConflictProbeInterval: time.Second})
	g.linkState = func(string) (bool, error) { return true, nil }
	g.joined = true
	g.heard[macB] = time.Now() // lb-b holds an address of every host
	grouped, shared := vips(32), vips(64)[32:]
	groups := map[netip.Addr]string{}
	for _, v := range grouped {
		groups[v] = edge
	}
	g.Observe(Observation{
		VIPs: append(slices.Clone(grouped), shared...), NodesReachable: true,
		Hosts:  []Host{{Name: "lb-b", MAC: macB}},
		Groups: groups, MyGroups: []string{edge},
	})
	var yielded []netip.Addr
	for _, v := range grouped {
		if !g.Owns(v) {
			yielded = append(yielded, v)
		}
	}
	if len(yielded) > 0 {
		t.Errorf("lb-a, the only edge host it knows of, yields %d of %d edge addresses to lb-b, known only from the link: %v", len(yielded), len(grouped), yielded)
	}
	owned := 0
	for _, v := range shared {
		if g.Owns(v) {
			owned++
		}
	}
	if owned == 0 || owned == len(shared) {
		t.Errorf("lb-a owns %d of %d addresses of every host, want them shared with lb-b", owned, len(shared))
	}
}

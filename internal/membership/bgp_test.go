package membership

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"
)

// bgpMember is a Gossip named self, joined, healthy, whose link is up,
// seeing peers; every address of vips is advertised over BGP.
func bgpMember(self string, holdDown time.Duration, vips []netip.Addr, peers ...Member) *Gossip {
	g := New(Config{Name: self, Interface: "lo", HoldDown: holdDown, ConflictProbeInterval: time.Second})
	g.linkState = func(string) (bool, error) { return true, nil }
	g.joined, g.observed = true, true
	g.obs = Observation{NodesReachable: true, Advertised: map[netip.Addr]bool{}}
	for _, v := range vips {
		g.obs.Advertised[v] = true
	}
	for _, p := range peers {
		g.peers[p.Name] = p
		g.gossiped[p.Name] = true
	}
	return g
}

// owned counts the addresses of vips that g owns.
func owned(g *Gossip, vips []netip.Addr) int {
	n := 0
	for _, v := range vips {
		if g.Owns(v) {
			n++
		}
	}
	return n
}

// TestHostWithoutSessionOwnsNoBGPAddress: the owner of an address of a
// proxy BGP pool advertises it; a host without an established session of
// its family cannot, and must not own it (its share would be black-holed).
// It owns none while its session is down, takes its share once its session
// has been up for the hold-down, and gives it up at once when the session
// goes down again.
func TestHostWithoutSessionOwnsNoBGPAddress(t *testing.T) {
	t0 := time.Now()
	all := vips(32)
	withSession := Member{Name: "lb-b", State: StateReady, BGP: []string{"ipv4"}}
	g := bgpMember("lb-a", 10*time.Second, all, withSession)
	step := func(at time.Duration, sessions []string) int {
		g.mu.Lock()
		g.obs.Sessions = sessions
		g.evaluate(t0.Add(at))
		g.mu.Unlock()
		return owned(g, all)
	}
	step(0, nil)
	if n := step(11*time.Second, nil); n != 0 {
		t.Fatalf("lb-a, Ready without a BGP session, owns %d of %d addresses advertised over BGP, want none: lb-b has a session", n, len(all))
	}
	if n := step(12*time.Second, []string{"ipv6"}); n != 0 {
		t.Fatalf("lb-a, with an IPv6 session only, owns %d IPv4 addresses advertised over BGP, want none", n)
	}
	if n := step(13*time.Second, []string{"ipv4", "ipv6"}); n != 0 {
		t.Fatalf("lb-a owns %d addresses as soon as its session is up, want none during the hold-down", n)
	}
	if n := step(23*time.Second, []string{"ipv4", "ipv6"}); n == 0 || n == len(all) {
		t.Fatalf("lb-a owns %d of %d addresses once its session has been up for the hold-down, want its share", n, len(all))
	}
	if n := step(24*time.Second, []string{"ipv6"}); n != 0 {
		t.Fatalf("lb-a owns %d addresses after its IPv4 session went down, want none at once", n)
	}
}

// TestBGPSessionOnlyMattersForAdvertisedAddresses: addresses held on the
// link are shared whatever the sessions.
func TestBGPSessionOnlyMattersForAdvertisedAddresses(t *testing.T) {
	l2 := vips(32)
	g := bgpMember("lb-a", 0, nil, Member{Name: "lb-b", State: StateReady, BGP: []string{"ipv4"}})
	g.mu.Lock()
	g.evaluate(time.Now())
	g.mu.Unlock()
	if n := owned(g, l2); n == 0 || n == len(l2) {
		t.Errorf("lb-a, without a BGP session, owns %d of %d addresses held on the link, want its share", n, len(l2))
	}
}

// TestLoneAdvertiserTakesAtOnce: when no other member may advertise the
// family, the first host whose session comes up takes every address at
// once: waiting would only keep them unadvertised.
func TestLoneAdvertiserTakesAtOnce(t *testing.T) {
	all := vips(16)
	g := bgpMember("lb-a", 10*time.Second, all, Member{Name: "lb-b", State: StateReady, BGP: []string{}})
	t0 := time.Now()
	for i, sessions := range [][]string{nil, {"ipv4"}} {
		g.mu.Lock()
		g.obs.Sessions = sessions
		g.evaluate(t0.Add(time.Duration(i) * 11 * time.Second))
		g.mu.Unlock()
	}
	if n := owned(g, all); n != len(all) {
		t.Errorf("lb-a, the only host with a session, owns %d of %d addresses, want all", n, len(all))
	}
}

func v6vips(n int) []netip.Addr {
	var out []netip.Addr
	a := netip.MustParseAddr("2001:db8::c8")
	for range n {
		out = append(out, a)
		a = a.Next()
	}
	return out
}

// TestOwnersAmongAdvertisers: an address advertised over BGP is owned only
// by a member that may advertise its family, and when a member loses its
// session only the addresses it owned move.
func TestOwnersAmongAdvertisers(t *testing.T) {
	cands := []string{"lb-1", "lb-2", "lb-3", "lb-4"}
	tests := []struct {
		name string
		fams candidateFamilies
		// may reports whether member may own an address of family.
		may func(member, family string) bool
	}{
		{
			name: "members without a session of the family own none",
			fams: candidateFamilies{"lb-1": {"ipv4"}, "lb-2": {}, "lb-3": {"ipv4", "ipv6"}, "lb-4": {"ipv6"}},
			may: func(m, f string) bool {
				return m == "lb-3" || m == "lb-1" && f == "ipv4" || m == "lb-4" && f == "ipv6"
			},
		},
		{
			name: "a member that publishes no families (an older agent) may advertise every one",
			fams: candidateFamilies{"lb-1": {}, "lb-2": nil, "lb-3": {}, "lb-4": {}},
			may:  func(m, _ string) bool { return m == "lb-2" },
		},
		{
			name: "nobody with a session: nobody owns",
			fams: candidateFamilies{"lb-1": {}, "lb-2": {}, "lb-3": {}, "lb-4": {}},
			may:  func(string, string) bool { return false },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, v := range append(vips(64), v6vips(64)...) {
				o := Owner(v, tt.fams.advertising(cands, v))
				if o == "" {
					if slices.ContainsFunc(cands, func(m string) bool { return tt.may(m, familyOf(v)) }) {
						t.Errorf("%s is owned by nobody", v)
					}
					continue
				}
				if !tt.may(o, familyOf(v)) {
					t.Errorf("%s is owned by %s, which may not advertise it (%v)", v, o, tt.fams[o])
				}
			}
		})
	}
	t.Run("a member losing its session moves only its own addresses", func(t *testing.T) {
		before := candidateFamilies{"lb-1": {"ipv4"}, "lb-2": {"ipv4"}, "lb-3": {"ipv4"}, "lb-4": {"ipv4"}}
		after := candidateFamilies{"lb-1": {"ipv4"}, "lb-2": {}, "lb-3": {"ipv4"}, "lb-4": {"ipv4"}}
		moved := 0
		for _, v := range vips(60) {
			was, is := Owner(v, before.advertising(cands, v)), Owner(v, after.advertising(cands, v))
			if was != is {
				moved++
				if was != "lb-2" {
					t.Errorf("%s moved from %s to %s", v, was, is)
				}
			}
			if is == "lb-2" {
				t.Errorf("%s is still owned by lb-2, without a session", v)
			}
		}
		if moved == 0 {
			t.Error("nothing moved from lb-2")
		}
	})
}

func TestBGPReadiness(t *testing.T) {
	t0 := time.Unix(1000, 0)
	v4 := []string{"ipv4"}
	both := []string{"ipv4", "ipv6"}
	withV4 := []Member{{Name: "lb-2", State: StateReady, BGP: v4}}
	without := []Member{{Name: "lb-2", State: StateReady, BGP: []string{}}}
	older := []Member{{Name: "lb-2", State: StateReady}}
	type step struct {
		at       time.Duration
		sessions []string
		peers    []Member
		want     []string
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"no session: no family", []step{
			{0, nil, withV4, []string{}},
		}},
		{"alone: a family at once", []step{
			{0, both, nil, both},
		}},
		{"another member advertises the family: hold-down first", []step{
			{0, nil, withV4, []string{}},
			{time.Second, both, withV4, []string{"ipv6"}},
			{5 * time.Second, both, withV4, []string{"ipv6"}},
			{11 * time.Second, both, withV4, both},
		}},
		{"an older member counts as advertising every family", []step{
			{0, nil, older, []string{}},
			{time.Second, v4, older, []string{}},
			{11 * time.Second, v4, older, v4},
		}},
		{"nobody else advertises it: at once", []step{
			{0, nil, without, []string{}},
			{time.Second, v4, without, v4},
		}},
		{"a session lost: the family goes at once", []step{
			{0, v4, nil, v4},
			{time.Second, nil, withV4, []string{}},
		}},
		{"a flapping session starts the hold-down again", []step{
			{0, v4, withV4, []string{}},
			{5 * time.Second, nil, withV4, []string{}},
			{6 * time.Second, v4, withV4, []string{}},
			{11 * time.Second, v4, withV4, []string{}},
			{16 * time.Second, v4, withV4, v4},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBGPReadiness(10 * time.Second)
			for i, s := range tt.steps {
				b.update(t0.Add(s.at), true, s.sessions, s.peers)
				if got := b.families(); !slices.Equal(got, s.want) {
					t.Fatalf("step %d (%s): families %v, want %v", i, s.at, got, s.want)
				}
			}
		})
	}
	b := newBGPReadiness(10 * time.Second)
	b.update(t0, true, v4, withV4)
	if w := b.wake(); !w.Equal(t0.Add(10 * time.Second)) {
		t.Errorf("wake %v during the hold-down, want its end", w)
	}
}

func TestMetaBGP(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   []byte
		want []string // nil: absent
	}{
		{"none", encodeMeta(meta{State: StateReady}), []string{}},
		{"both", encodeMeta(meta{State: StateReady, BGP: ptr(encodeFamilies([]string{"ipv4", "ipv6"}))}), []string{"ipv4", "ipv6"}},
		{"ipv6", encodeMeta(meta{State: StateReady, BGP: ptr(encodeFamilies([]string{"ipv6"}))}), []string{"ipv6"}},
		{"a family unknown here is skipped", []byte(`{"v":1,"state":"Ready","g":[],"b":"4x"}`), []string{"ipv4"}},
		{"an older member publishes none: every family", []byte(`{"v":1,"state":"Ready","g":[]}`), nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, err := decodeMeta(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			if m.BGP != nil {
				got = decodeFamilies(*m.BGP)
			}
			if (got == nil) != (tt.want == nil) || !slices.Equal(got, tt.want) {
				t.Errorf("families %#v, want %#v", got, tt.want)
			}
		})
	}
	// The largest metadata still fits memberlist's 512 bytes.
	var groups []string
	for i := range MaxGroups {
		groups = append(groups, Group(fmt.Sprint("selector-", i)))
	}
	big := encodeMeta(meta{State: StateUnhealthy, MAC: "02:00:00:00:00:01", Groups: groups, BGP: ptr(encodeFamilies(families))})
	if len(big) > 512 {
		t.Errorf("metadata of %d bytes, over memberlist's 512: %s", len(big), big)
	}
}

func ptr[T any](v T) *T { return &v }

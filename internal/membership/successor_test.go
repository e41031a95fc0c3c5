package membership

import (
	"net/netip"
	"testing"
	"time"
)

// TestSuccessor: the host that would hold an address if this one left is
// a Ready member that may hold it (of its host group, with a session of
// its family when it is advertised over BGP), never this host; none when
// no other may. When this host is leaving and no other member is Ready,
// a member in its hold-down (which becomes Ready once this host publishes
// StateLeaving) may; never while this host stays (a starting agent keeps
// what it adopted).
func TestSuccessor(t *testing.T) {
	const edge = "example.net/edge=true"
	vip := netip.MustParseAddr("192.0.2.10")
	tests := []struct {
		name       string
		peers      []Member
		group      string
		advertised bool
		staying    bool
		want       string
	}{
		{name: "alone", want: ""},
		{name: "a Ready peer", peers: []Member{{Name: "lb-b", State: StateReady}}, want: "lb-b"},
		{name: "a peer in hold-down", peers: []Member{{Name: "lb-b", State: StateHoldDown}}, want: "lb-b"},
		{name: "a peer in hold-down, this host staying", peers: []Member{{Name: "lb-b", State: StateHoldDown}}, staying: true, want: ""},
		{name: "a Ready peer and one in hold-down", peers: []Member{{Name: "lb-b", State: StateHoldDown}, {Name: "lb-c", State: StateReady}}, want: "lb-c"},
		{name: "peers in hold-down: by rendezvous hashing", peers: []Member{{Name: "lb-b", State: StateHoldDown}, {Name: "lb-c", State: StateHoldDown}}, want: Owner(vip, []string{"lb-b", "lb-c"})},
		{name: "a peer in hold-down outside the address's group", peers: []Member{{Name: "lb-b", State: StateHoldDown, Groups: []string{}}}, group: edge, want: ""},
		{name: "a starting peer", peers: []Member{{Name: "lb-b", State: StateStarting}}, want: ""},
		{name: "a leaving peer", peers: []Member{{Name: "lb-b", State: StateLeaving}}, want: ""},
		{name: "a draining peer", peers: []Member{{Name: "lb-b", State: StateDraining}}, want: "lb-b"},
		{name: "a draining peer, this host staying", peers: []Member{{Name: "lb-b", State: StateDraining}}, staying: true, want: "lb-b"},
		{name: "a draining peer and a Ready one", peers: []Member{{Name: "lb-b", State: StateDraining}, {Name: "lb-c", State: StateReady}}, want: "lb-c"},
		{name: "a draining peer and one in hold-down", peers: []Member{{Name: "lb-b", State: StateDraining}, {Name: "lb-c", State: StateHoldDown}}, want: "lb-b"},
		{name: "an unhealthy peer", peers: []Member{{Name: "lb-b", State: StateUnhealthy}}, want: ""},
		{name: "a peer outside the address's group", peers: []Member{{Name: "lb-b", State: StateReady, Groups: []string{}}}, group: edge, want: ""},
		{name: "a peer of the group", peers: []Member{{Name: "lb-b", State: StateReady, Groups: []string{edge}}}, group: edge, want: "lb-b"},
		{name: "advertised, a peer without a session", peers: []Member{{Name: "lb-b", State: StateReady, BGP: []string{}}}, advertised: true, want: ""},
		{name: "advertised, a peer with a session", peers: []Member{{Name: "lb-b", State: StateReady, BGP: []string{"ipv4"}}}, advertised: true, want: "lb-b"},
		// A member in its hold-down may not advertise yet (BGP empty), but
		// with an established session of the family it may at once when
		// this host leaves and nobody else serves.
		{name: "advertised, a peer in hold-down with a session of the family", peers: []Member{{Name: "lb-b", State: StateHoldDown, BGP: []string{}, Sessions: []string{"ipv4"}}}, advertised: true, want: "lb-b"},
		{name: "advertised, a peer in hold-down with a session of the other family", peers: []Member{{Name: "lb-b", State: StateHoldDown, BGP: []string{}, Sessions: []string{"ipv6"}}}, advertised: true, want: ""},
		{name: "advertised, a peer in hold-down without a session", peers: []Member{{Name: "lb-b", State: StateHoldDown, BGP: []string{}, Sessions: []string{}}}, advertised: true, want: ""},
		{name: "advertised, a peer in hold-down that publishes no sessions (older)", peers: []Member{{Name: "lb-b", State: StateHoldDown, BGP: []string{}}}, advertised: true, want: ""},
		// Ready, but its right to advertise the family still in its
		// hold-down: Ready at once for the family when this host leaves.
		{name: "advertised, a Ready peer whose family is not ready yet, with a session", peers: []Member{{Name: "lb-b", State: StateReady, BGP: []string{}, Sessions: []string{"ipv4"}}}, advertised: true, want: "lb-b"},
		{name: "advertised, a Ready peer whose family is not ready yet, with a session, this host staying", peers: []Member{{Name: "lb-b", State: StateReady, BGP: []string{}, Sessions: []string{"ipv4"}}}, advertised: true, staying: true, want: ""},
		{name: "advertised, a Ready peer without the family and one in hold-down with it", peers: []Member{{Name: "lb-b", State: StateReady, BGP: []string{}, Sessions: []string{}}, {Name: "lb-c", State: StateHoldDown, BGP: []string{}, Sessions: []string{"ipv4"}}}, advertised: true, want: ""},
		{name: "advertised, a peer in hold-down with a session, this host staying", peers: []Member{{Name: "lb-b", State: StateHoldDown, BGP: []string{}, Sessions: []string{"ipv4"}}}, advertised: true, staying: true, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := bgpMember("lb-a", 0, nil, tt.peers...)
			g.obs.Groups = map[netip.Addr]string{vip: tt.group}
			g.obs.MyGroups = []string{edge}
			g.obs.Advertised[vip] = tt.advertised
			g.obs.Sessions = []string{"ipv4"}
			g.mu.Lock()
			g.evaluate(time.Now())
			g.mu.Unlock()
			if !g.Owns(vip) && tt.want == "" {
				t.Fatalf("lb-a, Ready, does not own %s although no other host may", vip)
			}
			if got := g.Successor(vip, !tt.staying); got != tt.want {
				t.Errorf("Successor(%s, leaving %t) = %q, want %q", vip, !tt.staying, got, tt.want)
			}
		})
	}
}

// TestHoldDownEndsWhenTheOnlyServerLeaves: the rolling update of two
// hosts. lb-a restarted and holds down while lb-b serves; lb-b's agent
// stops: it names lb-a its successor, publishes StateLeaving (in its
// metadata, as Run does before the leave), and lb-a takes everything at
// once, before its hold-down would have ended, over IPv4 and IPv6
// addresses advertised or not. The metadata round trip is the one
// memberlist carries (an older agent reads Leaving as Starting: the
// same).
func TestHoldDownEndsWhenTheOnlyServerLeaves(t *testing.T) {
	vips := []netip.Addr{netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("2001:db8::10")}
	now := time.Now()
	a := bgpMember("lb-a", time.Minute, nil, Member{Name: "lb-b", State: StateReady})
	a.mu.Lock()
	a.evaluate(now)
	a.mu.Unlock()
	if st := a.Status().State; st != StateHoldDown {
		t.Fatalf("lb-a: %s beside a serving lb-b, want HoldDown", st)
	}
	b := bgpMember("lb-b", time.Minute, nil, Member{Name: "lb-a", State: StateHoldDown})
	b.mu.Lock()
	b.evaluate(now)
	b.mu.Unlock()
	for _, v := range vips {
		if !b.Owns(v) || a.Owns(v) {
			t.Fatalf("%s: lb-b owns %t, lb-a %t; want lb-b only", v, b.Owns(v), a.Owns(v))
		}
		if got := b.Successor(v, true); got != "lb-a" {
			t.Errorf("lb-b leaving: successor of %s %q, want lb-a", v, got)
		}
	}
	b.obs.Sessions = []string{"ipv6", "ipv4"}
	if m, err := decodeMeta(delegate{b}.NodeMeta(512)); err != nil || m.Sessions == nil || *m.Sessions != encodeFamilies(b.sessions()) || len(b.sessions()) == 0 {
		t.Fatalf("lb-b's metadata does not carry its sessions %v: %+v, %v", b.sessions(), m, err)
	}
	b.leaving = true
	m, err := decodeMeta(delegate{b}.NodeMeta(512))
	if err != nil || m.State != StateLeaving {
		t.Fatalf("lb-b's metadata when leaving: %+v, %v", m, err)
	}
	a.mu.Lock()
	a.peers["lb-b"] = Member{Name: "lb-b", State: m.State, Groups: m.Groups, BGP: decodeFamilies(*m.BGP)}
	a.evaluate(now.Add(time.Second))
	a.mu.Unlock()
	if st := a.Status().State; st != StateReady {
		t.Fatalf("lb-a: %s once lb-b is leaving, want Ready at once", st)
	}
	for _, v := range vips {
		if !a.Owns(v) {
			t.Errorf("lb-a does not own %s once lb-b is leaving", v)
		}
	}
}

// TestHolder: the member that holds an address and the host of its gossip
// address, for a host about to take the address over from it; no address
// when this host holds it, or the holder's address is not known.
func TestHolder(t *testing.T) {
	vip := netip.MustParseAddr("192.0.2.10")
	for _, tt := range []struct {
		name     string
		holdDown time.Duration // this host's: lb-b holds everything meanwhile
		peer     Member
		wantName string
		wantAddr string // "": invalid
	}{
		{"held by lb-b", time.Minute, Member{Name: "lb-b", State: StateReady, Addr: "192.0.2.12:7946"}, "lb-b", "192.0.2.12"},
		{"an IPv6 gossip address", time.Minute, Member{Name: "lb-b", State: StateReady, Addr: "[2001:db8::12]:7946"}, "lb-b", "2001:db8::12"},
		{"no address known", time.Minute, Member{Name: "lb-b", State: StateReady}, "lb-b", ""},
		{"held by this host: lb-b drains", 0, Member{Name: "lb-b", State: StateDraining, Addr: "192.0.2.12:7946"}, "lb-a", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := bgpMember("lb-a", tt.holdDown, nil, tt.peer)
			g.mu.Lock()
			g.evaluate(time.Now())
			g.mu.Unlock()
			name, addr := g.Holder(vip)
			var want netip.Addr
			if tt.wantAddr != "" {
				want = netip.MustParseAddr(tt.wantAddr)
			}
			if name != tt.wantName || addr != want {
				t.Errorf("Holder(%s) = %q %s, want %q %s", vip, name, addr, tt.wantName, want)
			}
		})
	}
}

package membership

import (
	"net/netip"
	"testing"
	"time"
)

// TestSuccessor: the host that would hold an address if this one left is
// a Ready member that may hold it (of its host group, with a session of
// its family when it is advertised over BGP), never this host; none when
// no other may.
func TestSuccessor(t *testing.T) {
	const edge = "example.net/edge=true"
	vip := netip.MustParseAddr("192.0.2.10")
	tests := []struct {
		name       string
		peers      []Member
		group      string
		advertised bool
		want       string
	}{
		{name: "alone", want: ""},
		{name: "a Ready peer", peers: []Member{{Name: "lb-b", State: StateReady}}, want: "lb-b"},
		{name: "a peer in hold-down", peers: []Member{{Name: "lb-b", State: StateHoldDown}}, want: ""},
		{name: "an unhealthy peer", peers: []Member{{Name: "lb-b", State: StateUnhealthy}}, want: ""},
		{name: "a peer outside the address's group", peers: []Member{{Name: "lb-b", State: StateReady, Groups: []string{}}}, group: edge, want: ""},
		{name: "a peer of the group", peers: []Member{{Name: "lb-b", State: StateReady, Groups: []string{edge}}}, group: edge, want: "lb-b"},
		{name: "advertised, a peer without a session", peers: []Member{{Name: "lb-b", State: StateReady, BGP: []string{}}}, advertised: true, want: ""},
		{name: "advertised, a peer with a session", peers: []Member{{Name: "lb-b", State: StateReady, BGP: []string{"ipv4"}}}, advertised: true, want: "lb-b"},
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
			if got := g.Successor(vip); got != tt.want {
				t.Errorf("Successor(%s) = %q, want %q", vip, got, tt.want)
			}
		})
	}
}

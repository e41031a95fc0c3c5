package membership

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/groundcloud/groundcloud/internal/layer2"
)

// TestClaimedKeepsVirtualIPs: the guard records the claims of virtual IPs
// only (a client resolving a virtual IP claims its own address), and hears
// an agent serve from its active claims.
func TestClaimedKeepsVirtualIPs(t *testing.T) {
	v, client := netip.MustParseAddr("192.0.2.200"), netip.MustParseAddr("192.0.2.50")
	const agentMAC, kernelMAC, clientMAC = "02:00:00:00:00:0a", "02:00:00:00:00:0b", "02:00:00:00:00:0c"
	g := New(Config{ConflictProbeInterval: time.Second})
	g.vips = map[netip.Addr]bool{v: true}
	for _, cl := range []layer2.Claim{
		{Addr: v, MAC: agentMAC, Active: true},
		{Addr: v, MAC: kernelMAC},
		{Addr: client, MAC: clientMAC},
		{Addr: client, MAC: clientMAC, Active: true},
	} {
		g.claimed(cl)
	}
	var seen []sightingKey
	for k := range g.conflicts.seen {
		seen = append(seen, k)
	}
	slices.SortFunc(seen, compareKeys)
	if diff := cmp.Diff([]sightingKey{{v, agentMAC}, {v, kernelMAC}}, seen, cmp.AllowUnexported(sightingKey{}), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("sightings (-want +got):\n%s", diff)
	}
	var heard []string
	for mac := range g.heard {
		heard = append(heard, mac)
	}
	if diff := cmp.Diff([]string{agentMAC}, heard); diff != "" {
		t.Errorf("heard (-want +got):\n%s", diff)
	}
}

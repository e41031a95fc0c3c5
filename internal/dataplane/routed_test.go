package dataplane

import (
	"net/netip"
	"strings"
	"testing"
)

// routedState has VIPs routed to the host (BGP) in proxy and passthrough
// forwarding, one without a healthy backend, and a VIP held on the
// interface beside them.
func routedState() State {
	st := State{Interface: "eth0", Links: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("2001:db8::/64")}}
	st.Services = []Service{
		newService("shop/web", withVIPs("198.51.100.100", "2001:db8:bb::100"), withRouted(),
			withPort(TCP, 80, 30080), withBackend("node-a", true, nodeA...), withBackend("node-b", true, nodeB...)),
		newService("shop/edge", withVIPs("198.51.100.101"), withRouted(), withForwarding(Passthrough),
			withPort(TCP, 443, 30443), withBackend("node-a", true, nodeA...), withBackend("node-b", true, nodeB...)),
		newService("shop/broken", withVIPs("198.51.100.102"), withRouted(),
			withPort(UDP, 5000, 30500), withBackend("node-a", false, nodeA...)),
		newService("infra/dns", withVIPs("192.0.2.101"),
			withPort(UDP, 53, 30053), withBackend("node-a", true, nodeA...)),
	}
	return st
}

func TestRoutedFullSyncGolden(t *testing.T) {
	s, v4, v6, nd := newFakePassthroughSyncer()
	mustSync(t, s, routedState())
	checkGolden(t, "routed-full-sync", transactions(v4, v6)+nd.LastTransaction.String())
}

// A routed VIP is not a local address: what no rule translates for it is
// forwarded, back to the router that sent it, unless filter-forward drops
// it.
func TestPacketFlowsRouted(t *testing.T) {
	tr, _ := syncedTracer(t, routedState())
	for _, tc := range []struct {
		name string
		p    packet
		want verdict
	}{
		{"served: forwarded as for a VIP on the interface", tcp("203.0.113.7", 40000, "198.51.100.100", 80),
			verdict{action: "forward", dnat: netip.MustParseAddrPort("192.0.2.12:30080"), snat: addr("198.51.100.100")}},
		{"port not served: dropped, not routed back", tcp("203.0.113.7", 40000, "198.51.100.100", 22), verdict{action: "drop"}},
		{"protocol not served: dropped", udp("203.0.113.7", 40000, "198.51.100.100", 80), verdict{action: "drop"}},
		{"the same over IPv6", udp("2001:db8:1::7", 40000, "2001:db8:bb::100", 22), verdict{action: "drop"}},
		{"a node's packet of a flow the host has no entry for: dropped", tcp("192.0.2.11", 30080, "198.51.100.100", 40000), verdict{action: "drop"}},
		{"the same over IPv6, UDP", udp("2001:db8::12", 30080, "2001:db8:bb::100", 40000), verdict{action: "drop"}},
		{"passthrough, port not served: dropped", tcp("203.0.113.7", 40000, "198.51.100.101", 22), verdict{action: "drop"}},
		{"no healthy backend: still rejected", udp("203.0.113.7", 40000, "198.51.100.102", 5000), verdict{action: "reject", reject: "icmp"}},
		{"a VIP on the interface: dropped at input as before", udp("203.0.113.7", 40000, "192.0.2.101", 22), verdict{action: "drop"}},
		{"other traffic is not touched", tcp("203.0.113.7", 40000, "198.51.100.50", 80),
			verdict{action: "forward", dnat: netip.MustParseAddrPort("198.51.100.50:80"), snat: addr("203.0.113.7")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tr.run(tc.p); got != tc.want {
				t.Errorf("%v: got %v, want %v", tc.p, got, tc.want)
			}
		})
	}
}

// A table without a routed VIP has neither routed-vips nor the rule that
// reads it: the ruleset of a host whose VIPs are all on its interface does
// not change.
func TestRoutedVIPsOnlyWhereRouted(t *testing.T) {
	r := Desired(routedState())
	if r.IPv4.Maps[mapRoutedVIPs] == nil || r.IPv6.Maps[mapRoutedVIPs] == nil {
		t.Fatalf("no %s map in a table with routed VIPs", mapRoutedVIPs)
	}
	for _, st := range []State{realisticState(), passthroughState()} {
		d := Desired(st)
		for _, tbl := range []*Table{d.IPv4, d.IPv6} {
			if tbl.Maps[mapRoutedVIPs] != nil {
				t.Errorf("%s table without routed VIPs has the %s map", tbl.Family, mapRoutedVIPs)
			}
			for _, rule := range tbl.Chains[chainFilterForward].Rules {
				if strings.Contains(rule, mapRoutedVIPs) {
					t.Errorf("%s table without routed VIPs has the rule %q", tbl.Family, rule)
				}
			}
		}
	}
}

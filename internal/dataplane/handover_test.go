package dataplane

import (
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// handOverState is realisticState (proxy forwarding) with a passthrough
// service beside it, and the hand-over of one IPv4 VIP of each forwarding,
// of an IPv6 VIP to an IPv4 host, and of an address no service has.
func handOverState() State {
	st := realisticState()
	st.Interface = "eth0"
	st.Services = append(st.Services, newService("shop/edge", withVIPs("192.0.2.110"), withForwarding(Passthrough),
		withPort(TCP, 80, 30090), withBackend("node-a", true, nodeA...)))
	st.HandOver = map[netip.Addr]netip.Addr{
		addr("192.0.2.100"):   addr("192.0.2.2"),
		addr("2001:db8::100"): addr("2001:db8::2"),
		addr("192.0.2.110"):   addr("192.0.2.2"), // passthrough: left out
		addr("2001:db8::101"): addr("192.0.2.2"), // of the other family: left out
		addr("192.0.2.199"):   addr("192.0.2.2"), // no service: left out
	}
	return st
}

func TestHandOverRules(t *testing.T) {
	r := Desired(handOverState())
	for _, tc := range []struct {
		table *Table
		want  map[string]string
	}{
		{r.IPv4, map[string]string{"192.0.2.100": "192.0.2.2"}},
		{r.IPv6, map[string]string{"2001:db8::100": "2001:db8::2"}},
	} {
		m := tc.table.Maps[mapHandOver]
		if m == nil {
			t.Fatalf("%s: no %s map", tc.table.Family, mapHandOver)
		}
		got := map[string]string{}
		for _, e := range m.Elements {
			got[strings.Join(e.Key, " . ")] = strings.Join(e.Value, " ")
		}
		if !maps.Equal(got, tc.want) {
			t.Errorf("%s: %s elements %v, want %v", tc.table.Family, mapHandOver, got, tc.want)
		}
		in := tc.table.Chains[chainFilterInput].Rules
		dup := slices.IndexFunc(in, func(r string) bool { return strings.Contains(r, "dup to") })
		drop := slices.IndexFunc(in, func(r string) bool { return strings.Contains(r, "vmap @"+mapProxyVIPs) })
		if dup < 0 || drop < 0 || dup > drop {
			t.Errorf("%s: filter-input %q: want the copy to the previous holder before the drop", tc.table.Family, in)
		}
		if !slices.ContainsFunc(tc.table.Chains[chainFilterForward].Rules, func(r string) bool { return strings.Contains(r, "vmap @"+mapProxyVIPs) }) {
			t.Errorf("%s: filter-forward %q does not drop what no rule translated for a proxy VIP", tc.table.Family, tc.table.Chains[chainFilterForward].Rules)
		}
	}

	// Without a hand-over, the tables are those of before: no map, no rule.
	for _, st := range []State{realisticState(), func() State {
		st := handOverState()
		st.HandOver = map[netip.Addr]netip.Addr{addr("192.0.2.110"): addr("192.0.2.2")}
		return st
	}()} {
		d := Desired(st)
		for _, tbl := range []*Table{d.IPv4, d.IPv6} {
			if tbl.Maps[mapHandOver] != nil {
				t.Errorf("%s: %s map without a hand-over of a proxy VIP", tbl.Family, mapHandOver)
			}
			for _, c := range []string{chainFilterInput, chainFilterForward} {
				for _, rule := range tbl.Chains[c].Rules {
					if strings.Contains(rule, "dup to") || (c == chainFilterForward && strings.Contains(rule, mapProxyVIPs)) {
						t.Errorf("%s: %s has %q without a hand-over", tbl.Family, c, rule)
					}
				}
			}
		}
	}
}

// What reaches the new holder of a VIP and no rule translates — a node's
// packet in a flow the previous holder forwarded — is copied to the
// previous holder and dropped here; what the rules translate is forwarded
// as before, without a copy; a VIP this host does not hold gets no copy.
func TestPacketFlowsHandOver(t *testing.T) {
	s, v4, v6, _ := newFakeSyncer()
	mustSync(t, s, handOverState())
	// This host holds the hand-over VIPs and 192.0.2.101, not 192.0.2.102.
	tr := newTracer(t, v4, v6, addr("192.0.2.100"), addr("2001:db8::100"), addr("192.0.2.101"))
	for _, tc := range []struct {
		name string
		p    packet
		want verdict
	}{
		{"a node's packet of a flow the host has no entry for: copied to the previous holder", tcp("192.0.2.11", 30080, "192.0.2.100", 40000),
			verdict{action: "drop", copyTo: addr("192.0.2.2")}},
		{"the same over IPv6, UDP", udp("2001:db8::12", 30080, "2001:db8::100", 40000), verdict{action: "drop", copyTo: addr("2001:db8::2")}},
		{"a client's first packet: forwarded, no copy", tcp("203.0.113.7", 40000, "192.0.2.100", 80),
			verdict{action: "forward", dnat: netip.MustParseAddrPort("192.0.2.11:30080"), snat: addr("192.0.2.100")}},
		{"a VIP taken over from nobody: dropped, no copy", tcp("192.0.2.11", 30054, "192.0.2.101", 40000), verdict{action: "drop"}},
		{"a proxy VIP held elsewhere: dropped, not routed to its holder", tcp("192.0.2.11", 30843, "192.0.2.102", 40000), verdict{action: "drop"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tr.run(tc.p)
			if tc.want.action == "forward" {
				// The bucket decides the node; only the copy matters here.
				got.dnat, tc.want.dnat = netip.AddrPort{}, netip.AddrPort{}
			}
			if got != tc.want {
				t.Errorf("%v: got %v (copy to %v), want %v (copy to %v)", tc.p, got, got.copyTo, tc.want, tc.want.copyTo)
			}
		})
	}
}

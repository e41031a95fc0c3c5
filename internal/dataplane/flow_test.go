package dataplane

import (
	"net/netip"
	"testing"
)

// syncedTracer syncs st into fakes and returns a tracer over them. The VIPs
// are local addresses of the LB host, as the agent configures them, but
// for those routed to it (Service.Routed).
func syncedTracer(t *testing.T, st State) (*tracer, *Syncer) {
	t.Helper()
	s, v4, v6, _ := newFakeSyncer()
	mustSync(t, s, st)
	var local []netip.Addr
	for _, svc := range st.Services {
		if !svc.Routed {
			local = append(local, svc.VIPs...)
		}
	}
	return newTracer(t, v4, v6, local...), s
}

func tcp(src string, sport uint16, dst string, dport uint16) packet {
	return packet{src: addr(src), dst: addr(dst), proto: "tcp", sport: sport, dport: dport}
}

func udp(src string, sport uint16, dst string, dport uint16) packet {
	return packet{src: addr(src), dst: addr(dst), proto: "udp", sport: sport, dport: dport}
}

func TestPacketFlows(t *testing.T) {
	tr, _ := syncedTracer(t, realisticState())
	forward := func(to string, snat string) verdict {
		return verdict{action: "forward", dnat: netip.MustParseAddrPort(to), snat: addr(snat)}
	}
	fromHost := func(p packet) packet { p.fromHost = true; return p }
	for _, tc := range []struct {
		name string
		p    packet
		want verdict
	}{
		// Which node a flow reaches is fixed by the kernel's jhash of source
		// address and port; the kernel test checks that prediction.
		{"web v4", tcp("198.51.100.7", 40000, "192.0.2.100", 80), forward("192.0.2.13:30080", "192.0.2.100")},
		{"web v4 https", tcp("198.51.100.7", 40000, "192.0.2.100", 443), forward("192.0.2.13:30443", "192.0.2.100")},
		{"web v6 goes to IPv6 node addresses", tcp("2001:db8:1::7", 40000, "2001:db8::100", 80), forward("[2001:db8::11]:30080", "2001:db8::100")},
		{"dns udp", udp("198.51.100.7", 40000, "192.0.2.101", 53), forward("192.0.2.12:30053", "192.0.2.101")},
		{"dns tcp", tcp("198.51.100.7", 40000, "192.0.2.101", 53), forward("192.0.2.12:30054", "192.0.2.101")},
		{"dns v6", udp("2001:db8:1::7", 40000, "2001:db8::101", 53), forward("[2001:db8::12]:30053", "2001:db8::101")},
		{"admin from an allowed range", tcp("198.51.100.7", 40000, "192.0.2.102", 8443), forward("192.0.2.11:30843", "192.0.2.102")},
		{"admin from an allowed address", tcp("203.0.113.7", 40000, "192.0.2.102", 8443), forward("192.0.2.12:30843", "192.0.2.102")},
		{"admin from elsewhere", tcp("203.0.113.8", 40000, "192.0.2.102", 8443), verdict{action: "drop"}},
		{"broken tcp", tcp("198.51.100.7", 40000, "192.0.2.103", 80), verdict{action: "reject", reject: "tcp reset"}},
		{"broken udp", udp("198.51.100.7", 40000, "192.0.2.103", 5000), verdict{action: "reject", reject: "icmp"}},
		{"broken v6 tcp", tcp("2001:db8:1::7", 40000, "2001:db8::103", 80), verdict{action: "reject", reject: "tcp reset"}},
		// What no rule translates for a VIP never reaches the host's stack,
		// which would reset it (see the filter-input rule in plan.go).
		{"VIP, port not served: dropped", tcp("198.51.100.7", 40000, "192.0.2.100", 22), verdict{action: "drop"}},
		{"VIP, protocol not served: dropped", udp("198.51.100.7", 40000, "192.0.2.100", 80), verdict{action: "drop"}},
		{"a node's packet of a flow the host has no entry for: dropped", tcp("192.0.2.13", 30080, "192.0.2.100", 40000), verdict{action: "drop"}},
		{"the same over IPv6", udp("2001:db8::12", 30053, "2001:db8::101", 40000), verdict{action: "drop"}},
		{"other traffic is not touched", tcp("198.51.100.7", 40000, "192.0.2.50", 80), forward("192.0.2.50:80", "198.51.100.7")},
		{"from the LB host itself", fromHost(tcp("192.0.2.1", 40000, "192.0.2.100", 80)), forward("192.0.2.11:30080", "192.0.2.100")},
		{"from the LB host, no backend", fromHost(tcp("192.0.2.1", 40000, "192.0.2.103", 80)), verdict{action: "reject", reject: "tcp reset"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tr.run(tc.p); got != tc.want {
				t.Errorf("%v: got %v, want %v", tc.p, got, tc.want)
			}
		})
	}
}

// Flows spread over all nodes of their family, and the same client address
// and port always gets the same node.
func TestPacketFlowsSpreadOverNodes(t *testing.T) {
	tr, _ := syncedTracer(t, realisticState())
	for _, tc := range []struct {
		vip  string
		src  string
		want map[netip.Addr]bool
	}{
		{"192.0.2.100", "198.51.100.7", map[netip.Addr]bool{addr("192.0.2.11"): true, addr("192.0.2.12"): true, addr("192.0.2.13"): true}},
		{"2001:db8::100", "2001:db8:1::7", map[netip.Addr]bool{addr("2001:db8::11"): true, addr("2001:db8::12"): true}},
	} {
		seen := map[netip.Addr]int{}
		for sport := uint16(40000); sport < 40300; sport++ {
			v := tr.run(tcp(tc.src, sport, tc.vip, 80))
			if again := tr.run(tcp(tc.src, sport, tc.vip, 80)); again != v {
				t.Fatalf("same flow, different verdicts: %v, %v", v, again)
			}
			if !tc.want[v.dnat.Addr()] {
				t.Fatalf("%s: flow forwarded to %v", tc.vip, v)
			}
			seen[v.dnat.Addr()]++
		}
		for node := range tc.want {
			if share := float64(seen[node]) / 300; share < 0.5/float64(len(tc.want)) {
				t.Errorf("%s: node %s got %.0f%% of the flows: %v", tc.vip, node, 100*share, seen)
			}
		}
	}
}

func TestPacketFlowsAffinity(t *testing.T) {
	tr, _ := syncedTracer(t, realisticState())
	first := tr.run(udp("198.51.100.7", 1000, "192.0.2.101", 53))
	for sport := uint16(1001); sport < 1100; sport++ {
		if v := tr.run(udp("198.51.100.7", sport, "192.0.2.101", 53)); v != first {
			t.Fatalf("ClientIP affinity broken: port %d goes to %v, port 1000 to %v", sport, v, first)
		}
	}
	nodes := map[netip.Addr]bool{}
	for i := range 50 {
		src := netip.AddrFrom4([4]byte{198, 51, 100, byte(i)})
		nodes[tr.run(udp(src.String(), 1000, "192.0.2.101", 53)).dnat.Addr()] = true
	}
	if len(nodes) != 2 {
		t.Errorf("clients not spread over both nodes: %v", nodes)
	}
}

// A node turning unhealthy gets no new flows, and flows on the other nodes
// stay where they are.
func TestPacketFlowsAfterNodeTurnsUnhealthy(t *testing.T) {
	tr, s := syncedTracer(t, realisticState())
	before := map[uint16]verdict{}
	for sport := uint16(40000); sport < 40200; sport++ {
		before[sport] = tr.run(tcp("198.51.100.7", sport, "192.0.2.100", 80))
	}
	mustSync(t, s, withHealth(realisticState(), "node-b", false))
	moved := 0
	for sport, old := range before {
		now := tr.run(tcp("198.51.100.7", sport, "192.0.2.100", 80))
		switch {
		case now.dnat.Addr() == addr("192.0.2.12"):
			t.Fatalf("new flow %d sent to unhealthy node-b", sport)
		case old.dnat.Addr() == addr("192.0.2.12"):
			moved++
		case now != old:
			t.Errorf("flow %d moved from %v to %v though its node is healthy", sport, old, now)
		}
	}
	if moved == 0 {
		t.Errorf("no flow was on node-b before; the test proves nothing")
	}
}

func TestTracerJhashKnownValues(t *testing.T) {
	// Kernel jhash of the empty key is the initial value mixed through no
	// rounds; of one zero word it is the well-known lookup3 hashword result
	// for initval 0 and a 4-byte length.
	if got := jhash(nil, 0); got != 0xdeadbeef {
		t.Errorf("jhash(nil, 0) = %#x, want 0xdeadbeef", got)
	}
	if a, b := jhash([]byte{1, 2, 3, 4}, 1), jhash([]byte{1, 2, 3, 4}, 2); a == b {
		t.Errorf("jhash ignores the seed")
	}
}

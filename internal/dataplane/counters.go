package dataplane

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"

	"sigs.k8s.io/knftables"
)

// Counting says which traffic counters the tables keep (see
// Syncer.CountTraffic). The zero value keeps none.
type Counting struct {
	// Frontends keeps, per frontend (VIP, protocol, port), a named counter
	// of the packets and bytes clients sent to it: in the ip and ip6
	// tables for proxy forwarding, in the netdev table for passthrough.
	Frontends bool
	// Nodes keeps, per proxy frontend and backend node, a named counter of
	// the new connections forwarded to that node.
	Nodes bool
}

func (c Counting) any() bool { return c.Frontends || c.Nodes }

// CounterKind is what a traffic counter counts.
type CounterKind string

// The kinds of traffic counters.
const (
	// CountReceived counts the packets and bytes clients sent to a
	// frontend (the original direction of its flows), after the source
	// ranges' drop: in proxy forwarding in filter-prerouting for packets
	// from elsewhere and filter-output for the host's own, in passthrough
	// in the service port's netdev chain.
	CountReceived CounterKind = "received"
	// CountConnections counts (as packets) the new connections DNATed to
	// one backend node, in nat-postrouting.
	CountConnections CounterKind = "connections"
)

// Names of the counter maps (only in tables with counters).
const (
	mapTraffic         = "traffic"
	mapNodeConnections = "node-connections"
	// In the netdev table, by family (passthrough).
	mapPassthroughTraffic4 = "passthrough-traffic4"
	mapPassthroughTraffic6 = "passthrough-traffic6"
)

// TrafficCounter is a named nftables counter of a table and what it
// counts. Its name is derived from every other field, so a counter of the
// same name counts the same thing across syncs.
type TrafficCounter struct {
	Name     string
	Kind     CounterKind
	Service  string // namespace/name
	VIP      netip.Addr
	Protocol Protocol
	Port     uint16
	// Node and NodeAddr are the backend of a CountConnections counter.
	Node     string
	NodeAddr netip.Addr
	NodePort uint16
}

// CounterReading is a counter's values at one read.
type CounterReading struct {
	TrafficCounter
	Packets, Bytes uint64
}

// receivedCounter names and describes the received counter of fe:
// "tr-<hash>-<namespace/name>/<proto>/<port>".
func receivedCounter(svc string, fe frontend) TrafficCounter {
	suffix := fe.port.Protocol.nft() + "/" + strconv.Itoa(int(fe.port.Port))
	name := "tr-" + shortHash(svc+" "+fe.vip.String()+" "+suffix) + "-" + readable(svc) + "/" + suffix
	return TrafficCounter{Name: name, Kind: CountReceived, Service: svc, VIP: fe.vip, Protocol: fe.port.Protocol, Port: fe.port.Port}
}

// connectionsCounter names and describes the counter of new connections of
// fe to node b at addr: "nc-<hash>-<node>". Its element's key is VIP .
// node address . protocol . NodePort (the port after DNAT): Kubernetes
// gives every Service port a NodePort of its own, so the key names one
// frontend.
func connectionsCounter(svc string, fe frontend, b Backend, addr netip.Addr) TrafficCounter {
	key := fmt.Sprintf("%s %s %s/%d/%d %s %s", svc, fe.vip, fe.port.Protocol.nft(), fe.port.Port, fe.port.NodePort, b.Node, addr)
	return TrafficCounter{
		Name: "nc-" + shortHash(key) + "-" + readable(b.Node), Kind: CountConnections, Service: svc,
		VIP: fe.vip, Protocol: fe.port.Protocol, Port: fe.port.Port, Node: b.Node, NodeAddr: addr, NodePort: fe.port.NodePort,
	}
}

// addCountingRules adds the counter maps and the rules that look them up
// to a table's skeleton. A failed lookup (a packet of no frontend) ends
// the rule, not the chain. The received rule follows the firewall check,
// so dropped sources are not counted; the connections rule precedes the
// SNAT, which ends nat-postrouting.
func addCountingRules(t *Table, f family, c Counting) {
	if c.Frontends {
		t.addMap(mapTraffic, f.addrType+" . inet_proto . inet_service : counter",
			"VIP . protocol . port to the counter of what clients sent to it")
		rule := "ct direction original counter name " + f.ip + " daddr . meta l4proto . th dport map @" + mapTraffic
		for _, name := range []string{chainFilterPrerouting, chainFilterOutput} {
			ch := t.Chains[name]
			ch.Rules = append(ch.Rules, rule)
		}
	}
	if c.Nodes {
		t.addMap(mapNodeConnections, f.addrType+" . "+f.addrType+" . inet_proto . inet_service : counter",
			"VIP . node address . protocol . NodePort to the counter of new connections forwarded to the node")
		ch := t.Chains[chainNATPostrouting]
		// The mark lets CountConnections find these connections in one
		// dump the kernel filters, whatever else the table holds.
		rule := fmt.Sprintf("ct status dnat ct mark set ct mark | %#08x counter name ct original %s daddr . %s daddr . meta l4proto . th dport map @%s",
			CountedMark, f.ip, f.ip, mapNodeConnections)
		ch.Rules = append([]string{rule}, ch.Rules...)
	}
}

// receivedKey is what a received counter is made of.
type receivedKey struct {
	service  string
	vip      netip.Addr
	protocol Protocol
	port     uint16
}

// receivedText is a received counter and its map element's value (the
// quoted name). Made once and reused, like frontendText, so that a sync
// compares the strings of the table applied before by pointer: making
// them on each sync was a third of the counters' cost at 5,000 services.
type receivedText struct {
	counter TrafficCounter
	value   []string
}

func newReceivedText(k receivedKey) receivedText {
	tc := receivedCounter(k.service, frontend{vip: k.vip, port: Port{Protocol: k.protocol, Port: k.port}})
	return receivedText{counter: tc, value: []string{strconv.Quote(tc.Name)}}
}

// receivedOf is the receivedText of svc's frontend fe.
func (m *assignMemo) receivedOf(svc string, fe frontend) receivedText {
	k := receivedKey{svc, fe.vip, fe.port.Protocol, fe.port.Port}
	if m == nil {
		return newReceivedText(k)
	}
	return remember(m.received, m.sweeps, k, newReceivedText)
}

// addFrontendCounters adds the counters of one proxy frontend and their
// map elements: received, and new connections per backend of the family
// (healthy or not, so that a node's counter survives a health change).
func addFrontendCounters(t *Table, f family, c Counting, memo *assignMemo, svc string, fe frontend, key []string, joined string, backends []Backend) {
	if c.Frontends {
		rt := memo.receivedOf(svc, fe)
		t.addCounter(rt.counter)
		t.addElementText(mapTraffic, joined, key, rt.value)
	}
	if !c.Nodes {
		return
	}
	for _, b := range backends {
		addr := firstAddr(f, b)
		if !addr.IsValid() {
			continue
		}
		tc := connectionsCounter(svc, fe, b, addr)
		t.addCounter(tc)
		k := []string{key[0], addr.String(), key[1], strconv.Itoa(int(fe.port.NodePort))}
		t.addElement(mapNodeConnections, k, []string{strconv.Quote(tc.Name)})
	}
}

// passthroughTrafficMap is the netdev table's counter map of family f.
func passthroughTrafficMap(f family) string {
	if f.nft == knftables.IPv6Family {
		return mapPassthroughTraffic6
	}
	return mapPassthroughTraffic4
}

// passthroughCountRule counts a packet of a passthrough service port's
// chain in its frontend's counter. It follows the source ranges' drop;
// only the packets of passthrough frontends pay for the lookup.
func passthroughCountRule(f family) string {
	return "counter name " + f.ip + " daddr . meta l4proto . th dport map @" + passthroughTrafficMap(f)
}

// addPassthroughCounter adds the received counter of a passthrough
// frontend (key is its element's key) and its element. A frontend none of
// whose nodes is reachable has no chain and no counter: its counter starts
// again from zero when one is. Passthrough keeps no connections, so there
// are no per-node counters.
func addPassthroughCounter(t *Table, f family, memo *assignMemo, svc string, fe frontend, key []string) {
	name := passthroughTrafficMap(f)
	if t.Maps[name] == nil {
		t.addMap(name, f.addrType+" . inet_proto . inet_service : counter",
			"VIP . protocol . port to the counter of what clients sent to it (passthrough)")
	}
	rt := memo.receivedOf(svc, fe)
	t.addCounter(rt.counter)
	t.addElement(name, key, rt.value)
}

func (t *Table) addCounter(tc TrafficCounter) {
	if t.Counters == nil {
		t.Counters = map[string]TrafficCounter{}
	}
	t.Counters[tc.Name] = tc
}

// diffCounters returns the counters desired has and applied lacks, and
// those applied has and desired lacks, sorted. A counter in both is left
// alone: its values go on across syncs.
func diffCounters(applied, desired *Table) (added, gone []string) {
	for _, name := range sortedKeys(desired.Counters) {
		if _, ok := applied.Counters[name]; !ok {
			added = append(added, name)
		}
	}
	for _, name := range sortedKeys(applied.Counters) {
		if _, ok := desired.Counters[name]; !ok {
			gone = append(gone, name)
		}
	}
	return added, gone
}

// CountTraffic makes the Syncer keep the counters of c in its tables
// (passthrough frontends: Frontends only, in the netdev table), from its
// next Sync on (the first Sync is a full one; call it
// before). ReadCounters reads them.
func (s *Syncer) CountTraffic(c Counting) *Syncer {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counting = c
	return s
}

// ReadCounters returns the values of the traffic counters of the tables
// the last Syncs applied (none without CountTraffic). It lists the
// counters of each table that has some, one nft command each, and does
// not hold up Sync meanwhile.
func (s *Syncer) ReadCounters(ctx context.Context) ([]CounterReading, error) {
	s.mu.Lock()
	applied := s.applied
	s.mu.Unlock()
	var out []CounterReading
	for _, f := range families {
		t, nft := applied.Table(f), s.nft[f]
		if t == nil || len(t.Counters) == 0 || nft == nil {
			continue
		}
		listed, err := nft.ListCounters(ctx)
		if err != nil {
			return out, fmt.Errorf("list %s counters: %w", f, err)
		}
		out = append(out, readings(t, listed)...)
	}
	return out, nil
}

// readings joins the counters listed in the kernel with what t says they
// count. Counters t does not know (made after t was read) are left out.
func readings(t *Table, listed []*knftables.Counter) []CounterReading {
	out := make([]CounterReading, 0, len(listed))
	for _, c := range listed {
		if c == nil {
			continue
		}
		tc, ok := t.Counters[c.Name]
		if !ok {
			continue
		}
		r := CounterReading{TrafficCounter: tc}
		if c.Packets != nil {
			r.Packets = *c.Packets
		}
		if c.Bytes != nil {
			r.Bytes = *c.Bytes
		}
		out = append(out, r)
	}
	return out
}

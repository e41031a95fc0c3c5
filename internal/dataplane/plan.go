package dataplane

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"sigs.k8s.io/knftables"
)

// HashSeed seeds the kernel's jhash that picks a flow's bucket. It must be
// the same on every LB host and never change: a different seed moves every
// flow on failover. (nft draws a random seed for a jhash without one.)
const HashSeed = 0x67636c64 // "gcld"

// Desired computes the ruleset that forwards s. It is pure. Parts of s that
// Validate reports are left out; everything else is programmed.
func Desired(s State) Ruleset {
	services, _ := normalize(s)
	r := desired(services, nil, Counting{})
	r.addHandOver(s.HandOver)
	return r
}

// desired computes the ruleset with the counters of c; memo (may be nil)
// remembers bucket assignments between calls.
func desired(services []service, memo *assignMemo, c Counting) Ruleset {
	r := Ruleset{
		IPv4:   desiredTable(ipv4, services, memo, c),
		IPv6:   desiredTable(ipv6, services, memo, c),
		NetDev: desiredNetDev(services, memo, c),
	}
	memo.sweep()
	return r
}

// family holds what differs between the ip and ip6 tables.
type family struct {
	nft      knftables.Family
	ip       string // "ip" or "ip6" in rules
	addrType string // "ipv4_addr" or "ipv6_addr" in map types
	is       func(netip.Addr) bool
}

var (
	ipv4 = family{knftables.IPv4Family, "ip", "ipv4_addr", netip.Addr.Is4}
	ipv6 = family{knftables.IPv6Family, "ip6", "ipv6_addr", netip.Addr.Is6}
)

func familyOf(f knftables.Family) family {
	if f == knftables.IPv6Family {
		return ipv6
	}
	return ipv4
}

// skeleton is the fixed part of a table: hooks, dispatch chains and maps.
// Filter chains run at dstnat-10, before DNAT and before the host's usual
// filter chains; reject is valid only in input, forward and output.
func skeleton(f family) *Table {
	t := newTable(f.nft)
	const newConn = "ct state new "
	filterPrio := knftables.DNATPriority + "-10"
	t.addBaseChain(chainFilterPrerouting, knftables.FilterType, knftables.PreroutingHook, filterPrio,
		newConn+"jump "+chainFirewallCheck)
	t.addBaseChain(chainFilterInput, knftables.FilterType, knftables.InputHook, filterPrio,
		newConn+"jump "+chainEndpointsCheck,
		// What reaches this host's own stack for a proxy VIP is a packet no
		// rule translated: to a port no Service has, out of its flow's TCP
		// window, or the first packet from a node of a flow this host has no
		// entry for (it took the address over). The stack would answer it
		// with a reset or a port unreachable, which kills the flow at the
		// node; dropped, it is sent again once the client's next packet has
		// made the entry (docs/packet-path.md, "After a failover").
		"ct state new,invalid meta l4proto { tcp, udp } "+f.ip+" daddr vmap @"+mapProxyVIPs)
	t.addBaseChain(chainFilterForward, knftables.FilterType, knftables.ForwardHook, filterPrio,
		newConn+"jump "+chainEndpointsCheck)
	t.addBaseChain(chainFilterOutput, knftables.FilterType, knftables.OutputHook, filterPrio,
		newConn+"jump "+chainEndpointsCheck, newConn+"jump "+chainFirewallCheck)
	t.addBaseChain(chainNATPrerouting, knftables.NATType, knftables.PreroutingHook, knftables.DNATPriority,
		"jump "+chainServices)
	t.addBaseChain(chainNATOutput, knftables.NATType, knftables.OutputHook, knftables.DNATPriority,
		"jump "+chainServices)
	t.addBaseChain(chainNATPostrouting, knftables.NATType, knftables.PostroutingHook, knftables.SNATPriority,
		fmt.Sprintf("ct status dnat snat %s to ct original %s daddr map @%s", f.ip, f.ip, mapVIPSNAT))

	dispatch := f.ip + " daddr . meta l4proto . th dport vmap @"
	t.addChain(chainFirewallCheck, dispatch+mapFirewallIPs)
	t.addChain(chainEndpointsCheck, dispatch+mapNoEndpoints)
	t.addChain(chainServices, dispatch+mapServicePorts)
	t.addChain(chainReject, "meta l4proto tcp reject with tcp reset", "reject")

	frontendType := f.addrType + " . inet_proto . inet_service : verdict"
	t.addMap(mapServicePorts, frontendType, "VIP . protocol . port to the chain that picks a backend")
	t.addMap(mapFirewallIPs, frontendType, "VIP . protocol . port to the chain that drops disallowed sources")
	t.addMap(mapNoEndpoints, frontendType, "VIP . protocol . port of services without a healthy backend")
	t.addMap(mapVIPSNAT, f.addrType+" : "+f.addrType, "VIP to the source address of packets forwarded for it")
	t.addMap(mapProxyVIPs, f.addrType+" : verdict", "VIPs forwarded in proxy mode: what no rule translated for them is dropped")
	t.addMap(mapNodePorts, f.addrType+" . inet_proto . inet_service : inet_service",
		"VIP . protocol . port to the NodePort of a service of a bucket group")
	return t
}

func desiredTable(f family, services []service, memo *assignMemo, c Counting) *Table {
	t := skeleton(f)
	addCountingRules(t, f, c)
	memo.presize(t)
	groups := groupMaps{}
	ofFamily := &familyBackends{f: f, counting: c}
	for _, svc := range services {
		addService(t, f, svc, memo, groups, ofFamily)
	}
	memo.recordSizes(t)
	return t
}

// familyBackends are the backends with an address of family f: usually
// all of them, and then no copy. It remembers the last list it filtered,
// which the services of a table usually share.
type familyBackends struct {
	f        family
	counting Counting // the table's counters, for addService
	last     sharedList
	out      []Backend
}

func (c *familyBackends) of(backends []Backend) []Backend {
	if len(backends) == 0 {
		return backends
	}
	if c.last.is(backends) {
		return c.out
	}
	out := backends
	if slices.ContainsFunc(backends, func(b Backend) bool { return !c.f.has(b) }) {
		out = slices.DeleteFunc(slices.Clone(backends), func(b Backend) bool { return !c.f.has(b) })
	}
	c.last, c.out = sharedListOf(backends), out
	return out
}

// groupMaps are the bucket assignments of the groups of one table (see
// Service.BucketGroup), by forwarding mode, family and group.
type groupMaps map[string]*groupMap

// groupMap is the assignment a group's services share, made for the
// backends of the group's first service.
type groupMap struct {
	backends []Backend
	index    *[BucketCount]uint8
	choices  *BucketChoices
	// mapName is the group's bucket map in proxy forwarding once it is in
	// the table; chains are its chains there, by protocol and affinity.
	mapName string
	chains  map[groupChainKey]string
}

type groupChainKey struct {
	proto    Protocol
	affinity bool
}

// chain is the group's chain in t for ports of proto, added with its rule
// when the first such port asks for it.
func (g *groupMap) chain(t *Table, f family, group string, proto Protocol, affinity bool) string {
	k := groupChainKey{proto, affinity}
	if name, ok := g.chains[k]; ok {
		return name
	}
	if g.chains == nil {
		g.chains = map[groupChainKey]string{}
	}
	name := groupChainName(group, proto, affinity)
	t.addChain(name, groupDNATRule(f, proto, affinity, g.mapName))
	g.chains[k] = name
	return name
}

// of returns the assignment of svc's group for backends (of family f, in
// forwarding mode kind), made by the group's first service; nil when svc
// has no group or its backends differ from that service's: it then has an
// assignment of its own.
func (g groupMaps) of(kind string, f family, svc service, backends []Backend, memo *assignMemo) *groupMap {
	if svc.group == "" {
		return nil
	}
	key := kind + " " + f.ip + " group " + svc.group
	if m, ok := g[key]; ok {
		if sameBackends(m.backends, backends) {
			return m
		}
		return nil
	}
	index, choices := memo.assign(key, "group "+svc.group, f, backends)
	m := &groupMap{backends: backends, index: index, choices: choices}
	g[key] = m
	return m
}

// sameBackends reports whether a and b list the same backends in the same
// order: at once when they are the same list, as the services of a group
// usually have.
func sameBackends(a, b []Backend) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] {
		return true
	}
	return slices.EqualFunc(a, b, func(x, y Backend) bool {
		return x.Node == y.Node && x.Healthy == y.Healthy && slices.Equal(x.Addrs, y.Addrs)
	})
}

func addService(t *Table, f family, svc service, memo *assignMemo, groups groupMaps, ofFamily *familyBackends) {
	var frontends []frontend
	for _, fe := range svc.frontends {
		if f.is(fe.vip) {
			frontends = append(frontends, fe)
		}
	}
	if len(frontends) == 0 {
		return
	}
	if svc.passthrough {
		addPassthroughChecks(t, f, svc, frontends, memo, groups)
		return
	}

	all := ofFamily.of(svc.backends)
	backends, _ := ForNewFlows(all, svc.self, svc.lbNodes)
	var index *[BucketCount]uint8
	var choices *BucketChoices
	group := groups.of("proxy", f, svc, backends, memo)
	textKey := portTextKey{service: svc.name, ipv6: f.nft == ipv6.nft, affinity: svc.affinity}
	if group != nil {
		index, choices = group.index, group.choices
		if group.mapName == "" {
			group.mapName = groupBucketMapName(svc.group)
			t.addBucketMap(group.mapName, f.ip+" daddr", &Buckets{Index: index, Choices: choices, Family: f.nft})
		}
	} else {
		index, choices = memo.assign(f.ip+" "+svc.name, svc.name, f, backends)
	}
	reachable := hasElements(index)

	fwChain := ""
	if svc.restricted {
		fwChain = firewallChainName(svc.name)
		t.addChain(fwChain, firewallRule(f, svc.ranges))
	}
	for _, fe := range frontends {
		var chain string
		if group != nil {
			// The group's chain: no chain per service port, which nft
			// would read on every run (see BenchmarkKernelAddOneService).
			chain = group.chain(t, f, svc.group, fe.port.Protocol, svc.affinity)
		} else {
			textKey.protocol, textKey.port, textKey.nodePort = fe.port.Protocol, fe.port.Port, fe.port.NodePort
			text := memo.text(textKey)
			chain = text.chain
			if _, ok := t.Chains[chain]; !ok {
				t.addChain(chain, text.rule)
				t.addBucketMap(bucketMapName(svc.name, fe.port), dnatValueTypeOf(f, fe.port.Protocol),
					&Buckets{Index: index, Choices: choices, NodePort: fe.port.NodePort, Family: f.nft})
			}
		}
		text := memo.frontend(frontendTextKey{vip: fe.vip, protocol: fe.port.Protocol, port: fe.port.Port, nodePort: fe.port.NodePort, chain: chain})
		if group != nil {
			t.addElementText(mapNodePorts, text.joined, text.key, text.nodePort)
		}
		t.addElementText(mapServicePorts, text.joined, text.key, text.verd)
		if ofFamily.counting.any() {
			addFrontendCounters(t, f, ofFamily.counting, memo, svc.name, fe, text.key, text.joined, all)
		}
		if fwChain != "" {
			t.addElementText(mapFirewallIPs, text.joined, text.key, []string{"goto " + fwChain})
		}
		if !reachable {
			t.addElementText(mapNoEndpoints, text.joined, text.key, gotoReject)
		}
		t.addElementText(mapVIPSNAT, text.key[0], text.vip, text.vip)
		t.addElementText(mapProxyVIPs, text.key[0], text.vip, verdictDrop)
		if svc.routed {
			t.addRoutedVIP(f, text.key[0], text.vip)
		}
		if fe.port.Protocol == UDP && reachable {
			for _, c := range index {
				if c == 0 {
					continue
				}
				t.UDPFlows[Flow{VIP: fe.vip, Port: fe.port.Port, Backend: choices.Addrs[c-1], NodePort: fe.port.NodePort}] = true
			}
		}
	}
}

// addRoutedVIP makes filter-forward drop the packets for vip (the address
// in nft syntax; key is the element's key, []string{vip}) that no rule
// translated: vip is routed to this host (Service.Routed), not one of its
// addresses, so such a packet is forwarded rather than delivered, back to
// the router that sent it, which sends it here again until its TTL runs
// out. That is a packet to a port no service has, one of a passthrough
// service that went up the stack untranslated, or, in proxy forwarding,
// the first packet from a node of a flow this host has no entry for, as
// after it took the address over: routed back, it would also leave an
// entry that moves the client's next packet to another source port
// (docs/packet-path.md, "After a failover"). The rule comes after the reject of services without a
// healthy backend; every packet a rule did translate has another
// destination by then (DNAT, or un-SNAT of a node's reply).
//
// The map and the rule exist only in a table with a routed VIP: a host
// whose VIPs are all on its interface keeps the ruleset it had.
func (t *Table) addRoutedVIP(f family, vip string, key []string) {
	if t.Maps[mapRoutedVIPs] == nil {
		t.addMap(mapRoutedVIPs, f.addrType+" : verdict", "VIPs routed to this host: what no rule translated for them is dropped, not routed back")
		c := t.Chains[chainFilterForward]
		c.Rules = append(slices.Clip(c.Rules), f.ip+" daddr vmap @"+mapRoutedVIPs)
	}
	t.addElementText(mapRoutedVIPs, vip, key, verdictDrop)
}

// addHandOver adds the entries of handOver (State.HandOver) whose VIP has
// proxy forwarding in the table of its family. The map and its rules exist
// only in a table with such an entry, as routed-vips': a host that took
// over nothing from a live host keeps the ruleset it had.
//
// filter-input copies what no rule translated for such a VIP, and
// conntrack does not know, to the previous holder (dup: the copy is sent
// to that host's link-layer address unchanged, its TTL one less, and the
// kernel sends no copy of a copy); the rule after it drops the original,
// as for every proxy VIP. filter-forward drops what arrives here for a
// proxy VIP this host does not hold and no rule translated — such a copy
// of a flow this host has no entry for either — rather than route it back
// to the address's holder, which would copy it here again until its TTL
// ran out.
func (r Ruleset) addHandOver(handOver map[netip.Addr]netip.Addr) {
	for vip, to := range handOver {
		vip, to = vip.Unmap(), to.Unmap()
		if vip.Is4() != to.Is4() || !to.IsValid() {
			continue
		}
		t, f := r.IPv4, ipv4
		if vip.Is6() {
			t, f = r.IPv6, ipv6
		}
		key := vip.String()
		if t == nil || t.Maps[mapProxyVIPs] == nil {
			continue
		}
		if _, ok := t.Maps[mapProxyVIPs].Elements[key]; !ok {
			continue
		}
		if t.Maps[mapHandOver] == nil {
			t.addMap(mapHandOver, f.addrType+" : "+f.addrType, "VIPs taken over from a host still up: what no rule translated and conntrack does not know is copied to it")
			in := t.Chains[chainFilterInput]
			last := len(in.Rules) - 1 // the drop of what no rule translated
			in.Rules = slices.Concat(in.Rules[:last:last],
				[]string{"ct state new,invalid meta l4proto { tcp, udp } dup to " + f.ip + " daddr map @" + mapHandOver},
				in.Rules[last:])
			fwd := t.Chains[chainFilterForward]
			fwd.Rules = append(slices.Clip(fwd.Rules), "ct state new,invalid meta l4proto { tcp, udp } "+f.ip+" daddr vmap @"+mapProxyVIPs)
		}
		t.addElementText(mapHandOver, key, []string{key}, []string{to.String()})
	}
}

// newPortText formats the chain name and DNAT rule of k, a port with a
// bucket map of its own.
func newPortText(k portTextKey) portText {
	f, p := ipv4, Port{Protocol: k.protocol, Port: k.port, NodePort: k.nodePort}
	if k.ipv6 {
		f = ipv6
	}
	return portText{chain: serviceChainName(k.service, p), rule: dnatRule(f, p, k.affinity, bucketMapName(k.service, p))}
}

// dnatValueTypeOf is the value of a DNAT bucket map's typeof, "ip daddr .
// tcp dport" and the like, one string per family and protocol.
func dnatValueTypeOf(f family, p Protocol) string {
	switch {
	case f.nft == ipv6.nft && p == UDP:
		return "ip6 daddr . udp dport"
	case f.nft == ipv6.nft:
		return "ip6 daddr . tcp dport"
	case p == UDP:
		return "ip daddr . udp dport"
	}
	return "ip daddr . tcp dport"
}

// dnatRule picks the bucket by "jhash saddr . sport" (saddr alone for
// ClientIP affinity) seeded with HashSeed and DNATs to that bucket's
// backend, looked up in the port's bucket map (address . NodePort). nft
// 1.0.6 needs "meta l4proto" before "dnat ... map". The rule does not
// depend on the backends: a change of backends or health changes the map's
// elements only. With no element (no healthy backend) the lookup fails and
// the rule does not match.
func dnatRule(f family, p Port, affinity bool, bucketMap string) string {
	key := f.ip + " saddr . th sport"
	if affinity {
		key = f.ip + " saddr"
	}
	return fmt.Sprintf("meta l4proto %s dnat %s to jhash %s mod %d seed %#x map @%s", p.Protocol.nft(), f.ip, key, BucketCount, HashSeed, bucketMap)
}

// groupDNATRule is the one rule of a bucket group's chain for protocol
// proto: the bucket is picked by a jhash that also covers the VIP and port
// ("jhash saddr . sport . daddr . dport", "saddr . daddr . dport" for
// ClientIP affinity), so that a client's flows to two services of the
// group land in unrelated buckets; the address comes from the group's map
// and the NodePort from @node-ports (VIP . protocol . port).
func groupDNATRule(f family, proto Protocol, affinity bool, bucketMap string) string {
	key := f.ip + " saddr . th sport . " + f.ip + " daddr . th dport"
	if affinity {
		key = f.ip + " saddr . " + f.ip + " daddr . th dport"
	}
	return fmt.Sprintf("meta l4proto %s dnat %s to jhash %s mod %d seed %#x map @%s : %s daddr . meta l4proto . th dport map @%s",
		proto.nft(), f.ip, key, BucketCount, HashSeed, bucketMap, f.ip, mapNodePorts)
}

// has reports whether b has an address of the family.
func (f family) has(b Backend) bool {
	return slices.ContainsFunc(b.Addrs, f.is)
}

// firstAddr is b's first address of family f (the one forwarded to), or
// the zero Addr.
func firstAddr(f family, b Backend) netip.Addr {
	for _, a := range b.Addrs {
		if f.is(a) {
			return a
		}
	}
	return netip.Addr{}
}

// firewallRule drops new flows from outside ranges (the ranges of this
// family; with none, every source of this family is outside).
func firewallRule(f family, ranges []netip.Prefix) string {
	var own []string
	for _, r := range ranges {
		if f.is(r.Addr()) {
			own = append(own, r.String())
		}
	}
	if len(own) == 0 {
		return "drop"
	}
	return fmt.Sprintf("%s saddr != { %s } drop", f.ip, strings.Join(own, ", "))
}

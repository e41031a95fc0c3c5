package dataplane

import (
	"fmt"
	"slices"
	"strconv"

	"sigs.k8s.io/knftables"
)

// Names in the netdev table (passthrough forwarding).
const (
	mapPassthroughPorts4 = "passthrough-ports4"
	mapPassthroughPorts6 = "passthrough-ports6"
)

// ingressChainName names the base chain on iface. The device of a base
// chain cannot change in place, so another interface gets another chain
// (and the old one is deleted as stale).
func ingressChainName(iface string) string { return "ingress-" + readable(iface) }

// passthroughChainName names the chain that picks the node for one port of
// a service in family f: "ip-svc-…" or "ip6-svc-…".
func passthroughChainName(f family, service string, p Port) string {
	return f.ip + "-" + serviceChainName(service, p)
}

// nodeChainName names the chain that forwards to one node in family f:
// "ip-node-<hash>-<node>". It is shared by every service the node serves,
// so a node's new address rewrites one chain.
func nodeChainName(f family, node string) string {
	return f.ip + "-node-" + shortHash(node) + "-" + readable(node)
}

// passthroughBucketMapName names the bucket map of a passthrough service in
// family f: "ip-bkt-<hash>-<namespace/name>". Its ports share it: their
// buckets and verdicts are the same.
func passthroughBucketMapName(f family, service string) string {
	return f.ip + "-bkt-" + shortHash(service) + "-" + readable(service)
}

// passthroughGroupMapName names the bucket map a group's passthrough
// services share in family f: "ip-grp-<hash>-<group>".
func passthroughGroupMapName(f family, group string) string {
	return f.ip + "-" + groupBucketMapName(group)
}

// desiredNetDev computes the netdev table: at the ingress of the interface,
// before routing and conntrack, packets addressed to this host's
// link-layer address and to a passthrough frontend go by
// "ip daddr . meta l4proto . th dport vmap" to the service port's chain,
// which drops sources outside the source ranges and picks a bucket by the
// same jhash as proxy mode; the bucket's verdict jumps to the node's chain
// ("fwd ip to <node> device <iface>": the packet leaves unchanged, to the
// node's link-layer address) or, for the buckets of this host's own node
// (State.Self), accepts, so that the packet goes up this host's stack to
// its own kube-proxy. Frontends without a reachable bucket get no element:
// their packets reach the ip/ip6 table, which rejects them.
//
// With c.Frontends, each service port's chain also counts what clients
// send to each of its frontends (see addPassthroughCounter).
func desiredNetDev(services []service, memo *assignMemo, c Counting) *Table {
	groups := groupMaps{}
	t := newTable(knftables.NetDevFamily)
	iface := ""
	for _, svc := range services {
		if svc.passthrough {
			iface = svc.iface
			break
		}
	}
	frontendType := func(f family) string { return f.addrType + " . inet_proto . inet_service : verdict" }
	t.addMap(mapPassthroughPorts4, frontendType(ipv4), "VIP . protocol . port to the chain that picks a node (passthrough)")
	t.addMap(mapPassthroughPorts6, frontendType(ipv6), "VIP . protocol . port to the chain that picks a node (passthrough)")
	if iface == "" {
		return t
	}
	// Only frames addressed to this host's link-layer address: a switch
	// (or bridge) floods frames for an unknown destination to every port,
	// and every host that forwarded those would send the node a copy.
	t.addChain(ingressChainName(iface),
		"meta pkttype host meta protocol ip ip daddr . meta l4proto . th dport vmap @"+mapPassthroughPorts4,
		"meta pkttype host meta protocol ip6 ip6 daddr . meta l4proto . th dport vmap @"+mapPassthroughPorts6,
	).Base = &BaseChain{Type: knftables.FilterType, Hook: knftables.IngressHook, Priority: knftables.FilterPriority, Device: iface}
	for _, svc := range services {
		if svc.passthrough {
			for _, f := range []family{ipv4, ipv6} {
				addPassthrough(t, f, svc, memo, groups, c)
			}
		}
	}
	return t
}

func addPassthrough(t *Table, f family, svc service, memo *assignMemo, groups groupMaps, c Counting) {
	index, choices, grouped := passthroughBuckets(f, svc, memo, groups)
	if !hasElements(index) {
		return
	}
	dispatch := mapPassthroughPorts4
	if f.nft == knftables.IPv6Family {
		dispatch = mapPassthroughPorts6
	}
	bucketMap, seed := passthroughBucketMapName(f, svc.name), uint32(HashSeed)
	if grouped {
		bucketMap, seed = passthroughGroupMapName(f, svc.group), serviceSeed(svc.name)
	}
	served := false
	for _, fe := range svc.frontends {
		if !f.is(fe.vip) {
			continue
		}
		served = true
		chain := passthroughChainName(f, svc.name, fe.port)
		if _, ok := t.Chains[chain]; !ok {
			var rules []string
			if svc.restricted {
				rules = append(rules, firewallRule(f, svc.ranges))
			}
			if c.Frontends {
				rules = append(rules, passthroughCountRule(f))
			}
			t.addChain(chain, append(rules, bucketRule(f, svc.affinity, seed, bucketMap))...)
		}
		key := []string{fe.vip.String(), fe.port.Protocol.nft(), strconv.Itoa(int(fe.port.Port))}
		t.addElement(dispatch, key, []string{"goto " + chain})
		if c.Frontends {
			addPassthroughCounter(t, f, memo, svc.name, fe, key)
		}
	}
	if !served {
		return
	}
	if t.Maps[bucketMap] != nil {
		return // the group's, with its node chains
	}
	t.addBucketMap(bucketMap, "verdict", &Buckets{Index: index, Choices: choices.withGotos(f), Verdict: true, Self: svc.self, Family: f.nft})
	var seen [256]bool // by choice
	for _, c := range index {
		if c == 0 || seen[c] {
			continue
		}
		seen[c] = true
		if node := choices.Nodes[c-1]; node != svc.self {
			t.addChain(nodeChainName(f, node), fmt.Sprintf("fwd %s to %s device %q", f.ip, choices.Addrs[c-1], svc.iface))
		}
	}
}

// bucketRule picks the bucket by the same jhash as dnatRule and takes its
// verdict from the service's (or its group's) bucket map: "goto" the
// bucket's node chain, or "accept" for the buckets of self (see Buckets).
// The rule does not depend on the backends.
func bucketRule(f family, affinity bool, seed uint32, bucketMap string) string {
	key := f.ip + " saddr . th sport"
	if affinity {
		key = f.ip + " saddr"
	}
	return fmt.Sprintf("jhash %s mod %d seed %#x vmap @%s", key, BucketCount, seed, bucketMap)
}

// passthroughBuckets assigns the buckets of svc in family f among its
// backends with an address of f, and says whether the assignment is its
// group's. Unlike proxy forwarding, self keeps its buckets (its own
// kube-proxy serves them), and a backend whose address is not on a link of
// the interface counts as unhealthy: listed, so that its buckets come back
// to it, but given none.
func passthroughBuckets(f family, svc service, memo *assignMemo, groups groupMaps) (*[BucketCount]uint8, *BucketChoices, bool) {
	// Copied only when a backend must go or be marked (this runs for
	// every passthrough service twice per family on every sync): the
	// services of a group then share the list, which groups.of compares
	// at once.
	backends := svc.backends
	if slices.ContainsFunc(backends, func(b Backend) bool {
		a := firstAddr(f, b)
		return !a.IsValid() || (b.Healthy && !onLink(svc.links, a))
	}) {
		backends = nil
		for _, b := range svc.backends {
			a := firstAddr(f, b)
			if !a.IsValid() {
				continue
			}
			if b.Healthy && !onLink(svc.links, a) {
				b.Healthy = false
			}
			backends = append(backends, b)
		}
	}
	if g := groups.of("passthrough", f, svc, backends, memo); g != nil {
		return g.index, g.choices, true
	}
	index, choices := memo.assign("passthrough "+f.ip+" "+svc.name, svc.name, f, backends)
	return index, choices, false
}

// addPassthroughChecks adds what the ip/ip6 table does for a passthrough
// service: drop sources outside its ranges, reject new flows while no
// bucket is reachable (the netdev table then lets its packets through to
// this host's stack) and, for a routed VIP, drop what goes up the stack
// untranslated (addRoutedVIP). Everything else happens in the netdev
// table; packets of self's buckets reach this host's stack and its own
// kube-proxy.
func addPassthroughChecks(t *Table, f family, svc service, frontends []frontend, memo *assignMemo, groups groupMaps) {
	index, _, _ := passthroughBuckets(f, svc, memo, groups)
	fwChain := ""
	if svc.restricted {
		fwChain = firewallChainName(svc.name)
		t.addChain(fwChain, firewallRule(f, svc.ranges))
	}
	for _, fe := range frontends {
		key := []string{fe.vip.String(), fe.port.Protocol.nft(), strconv.Itoa(int(fe.port.Port))}
		if fwChain != "" {
			t.addElement(mapFirewallIPs, key, []string{"goto " + fwChain})
		}
		if !hasElements(index) {
			t.addElement(mapNoEndpoints, key, []string{"goto " + chainReject})
		}
		if svc.routed {
			t.addRoutedVIP(f, key[0], []string{key[0]})
		}
	}
}

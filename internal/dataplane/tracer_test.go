package dataplane

// A packet tracer over knftables.Fake, in the spirit of kube-proxy's nftables
// tracer (pkg/proxy/nftables/helpers_test.go): it walks the base chains of the
// Fake's table in hook and priority order for the first packet of a flow and
// evaluates the rules the way the kernel would — but only the rule forms this
// package generates. An unknown form fails the test, so the tracer cannot
// silently skip a rule.
//
// It models: hook order (prerouting, then input for local destinations or
// forward+postrouting otherwise; output+postrouting for locally generated
// packets), priorities within a hook, jump/goto/return, verdict maps, the
// anonymous sets of the firewall, DNAT through the named jhash bucket map (with the
// kernel's jhash and reciprocal_scale, so it predicts the real bucket), and
// SNAT through `ct original daddr` maps.
//
// It does not model: conntrack beyond "this is a new flow" (no established
// flows, no NAT of replies, no loose pickup), the routing table (the caller
// lists the local addresses), packets through lo, fragments, ICMP, and any
// table but ours.

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"
)

type packet struct {
	src, dst     netip.Addr
	proto        string // "tcp" or "udp"
	sport, dport uint16
	// fromHost marks a packet sent by a process on the LB host (output hook).
	fromHost bool
}

func (p packet) String() string {
	from := ""
	if p.fromHost {
		from = " (from the host)"
	}
	return fmt.Sprintf("%s %s -> %s%s", p.proto, netip.AddrPortFrom(p.src, p.sport), netip.AddrPortFrom(p.dst, p.dport), from)
}

// verdict is what happens to the first packet of a flow.
type verdict struct {
	action string // "forward", "local" (delivered to the host), "drop" or "reject"
	dnat   netip.AddrPort
	snat   netip.Addr
	reject string // "tcp reset" or "icmp"
	// copyTo is where a dup statement sent a copy of the packet (the
	// packet itself goes on to its action).
	copyTo netip.Addr
}

func (v verdict) String() string {
	switch v.action {
	case "forward":
		return fmt.Sprintf("forward to %s from %s", v.dnat, v.snat)
	case "reject":
		return "reject with " + v.reject
	}
	return v.action
}

type tracer struct {
	t      *testing.T
	tables map[knftables.Family]*knftables.Fake
	local  []netip.Addr
}

func newTracer(t *testing.T, v4, v6 *knftables.Fake, local ...netip.Addr) *tracer {
	t.Helper()
	return &tracer{t: t, tables: map[knftables.Family]*knftables.Fake{knftables.IPv4Family: v4, knftables.IPv6Family: v6}, local: local}
}

// flow is the packet being traced and what the rules did to it.
type flow struct {
	packet
	origDst netip.Addr
	dnatted bool
	snat    netip.Addr
	copyTo  netip.Addr
	trace   []string
}

func (tr *tracer) run(p packet) verdict {
	tr.t.Helper()
	fam := knftables.IPv4Family
	if p.dst.Is6() {
		fam = knftables.IPv6Family
	}
	fake := tr.tables[fam]
	if fake == nil || fake.Table == nil {
		tr.t.Fatalf("no %s table to trace %v through", fam, p)
	}
	f := &flow{packet: p, origDst: p.dst}
	first := []knftables.BaseChainHook{knftables.PreroutingHook}
	if p.fromHost {
		first = []knftables.BaseChainHook{knftables.OutputHook}
	}
	if v := tr.hooks(fake.Table, fam, f, first...); v != "" {
		return tr.final(f, v)
	}
	if slices.Contains(tr.local, f.dst) {
		if p.fromHost {
			return verdict{action: "local"}
		}
		if v := tr.hooks(fake.Table, fam, f, knftables.InputHook); v != "" {
			return tr.final(f, v)
		}
		return verdict{action: "local"}
	}
	next := []knftables.BaseChainHook{knftables.ForwardHook, knftables.PostroutingHook}
	if p.fromHost {
		next = next[1:]
	}
	if v := tr.hooks(fake.Table, fam, f, next...); v != "" {
		return tr.final(f, v)
	}
	snat := f.src
	if f.snat.IsValid() {
		snat = f.snat
	}
	return verdict{action: "forward", dnat: netip.AddrPortFrom(f.dst, f.dport), snat: snat}
}

func (tr *tracer) final(f *flow, v string) verdict {
	switch {
	case v == "drop":
		return verdict{action: "drop", copyTo: f.copyTo}
	case v == "reject with tcp reset":
		return verdict{action: "reject", reject: "tcp reset"}
	case v == "reject":
		return verdict{action: "reject", reject: "icmp"}
	}
	tr.t.Fatalf("unexpected final verdict %q (trace %v)", v, f.trace)
	return verdict{}
}

// hooks runs the base chains of each hook in priority order and returns a
// verdict that ends the packet ("drop", "reject…"), or "" when it goes on.
func (tr *tracer) hooks(table *knftables.FakeTable, fam knftables.Family, f *flow, hooks ...knftables.BaseChainHook) string {
	for _, hook := range hooks {
		type base struct {
			prio int
			name string
		}
		var chains []base
		for name, c := range table.Chains {
			if c.Hook != nil && *c.Hook == hook {
				prio, err := knftables.ParsePriority(fam, string(*c.Priority))
				if err != nil {
					tr.t.Fatalf("chain %s: %v", name, err)
				}
				chains = append(chains, base{prio, name})
			}
		}
		slices.SortFunc(chains, func(a, b base) int { return a.prio - b.prio })
		for _, c := range chains {
			switch v := tr.chain(table, f, c.name, 0); v {
			case "", "accept", "nat":
			default:
				return v
			}
		}
	}
	return ""
}

var (
	reCtStateNew   = regexp.MustCompile(`^ct state new(,invalid)?\s*`)
	reCtStatusDNAT = regexp.MustCompile(`^ct status dnat\s*`)
	reL4Proto      = regexp.MustCompile(`^meta l4proto (\w+)\s*`)
	reL4ProtoSet   = regexp.MustCompile(`^meta l4proto \{ ([^}]*) \}\s*`)
	reDaddrVmap    = regexp.MustCompile(`^(ip6?) daddr vmap @(\S+)\s*`)
	reDup          = regexp.MustCompile(`^dup to (ip6?) daddr map @(\S+)\s*`)
	reDispatch     = regexp.MustCompile(`^(ip6?) daddr \. meta l4proto \. th dport vmap @(\S+)\s*`)
	reSaddrNotIn   = regexp.MustCompile(`^(ip6?) saddr != \{ ([^}]*) \}\s*`)
	reJump         = regexp.MustCompile(`^(jump|goto) (\S+)\s*`)
	reTerminal     = regexp.MustCompile(`^(drop|accept|reject with tcp reset|reject)\s*$`)
	reDNAT         = regexp.MustCompile(`^dnat (ip6?) to jhash (ip6?) saddr( \. th sport)?( \. ip6? daddr \. th dport)? mod (\d+) seed (0x[0-9a-f]+) map @(\S+)( : (\d+))?( : ip6? daddr \. meta l4proto \. th dport map @(\S+))?\s*$`)
	reSNAT         = regexp.MustCompile(`^snat (ip6?) to ct original (ip6?) daddr map @(\S+)\s*$`)
)

// chain evaluates a chain and returns its verdict: "" when it ran to its
// end, "accept", "drop", "reject…", or "nat" after a NAT statement.
func (tr *tracer) chain(table *knftables.FakeTable, f *flow, name string, depth int) string {
	if depth > 16 {
		tr.t.Fatalf("chain loop at %s (trace %v)", name, f.trace)
	}
	c := table.Chains[name]
	if c == nil {
		tr.t.Fatalf("no chain %q (trace %v)", name, f.trace)
	}
	f.trace = append(f.trace, name)
	for _, r := range c.Rules {
		if v, done := tr.rule(table, f, r.Rule, depth); done {
			return v
		}
	}
	return ""
}

// rule evaluates one rule; done means the chain stops with verdict v.
func (tr *tracer) rule(table *knftables.FakeTable, f *flow, rule string, depth int) (v string, done bool) {
	for rest := rule; rest != ""; {
		var m []string
		switch {
		case match(reCtStateNew, &rest, &m):
			// Every traced packet is the first of its flow.
		case match(reCtStatusDNAT, &rest, &m):
			if !f.dnatted {
				return "", false
			}
		case match(reL4Proto, &rest, &m):
			if m[1] != f.proto {
				return "", false
			}
		case match(reL4ProtoSet, &rest, &m):
			if !slices.Contains(strings.Split(m[1], ", "), f.proto) {
				return "", false
			}
		case match(reDaddrVmap, &rest, &m):
			target := tr.lookup(table, m[2], f.dst.String())
			if target == "" {
				return "", false
			}
			rest = target + " " + rest
		case match(reDup, &rest, &m):
			if to := tr.lookup(table, m[2], f.dst.String()); to != "" {
				f.copyTo = netip.MustParseAddr(to)
			}
		case match(reDispatch, &rest, &m):
			target := tr.lookup(table, m[2], f.dst.String(), f.proto, strconv.Itoa(int(f.dport)))
			if target == "" {
				return "", false
			}
			rest = target + " " + rest
		case match(reSaddrNotIn, &rest, &m):
			if inPrefixes(tr.t, f.src, m[2]) {
				return "", false
			}
		case match(reJump, &rest, &m):
			v := tr.chain(table, f, m[2], depth+1)
			if m[1] == "goto" || (v != "" && v != "return") {
				return v, true
			}
		case match(reDNAT, &rest, &m):
			if !tr.dnat(table, f, m) {
				return "", false
			}
			return "nat", true
		case match(reSNAT, &rest, &m):
			addr := tr.lookup(table, m[3], f.origDst.String())
			if addr == "" {
				return "", false
			}
			f.snat = netip.MustParseAddr(addr)
			return "nat", true
		case match(reTerminal, &rest, &m):
			return m[1], true
		default:
			tr.t.Fatalf("tracer does not understand %q in rule %q", rest, rule)
		}
	}
	return "", false
}

func match(re *regexp.Regexp, rest *string, m *[]string) bool {
	*m = re.FindStringSubmatch(*rest)
	if *m == nil {
		return false
	}
	*rest = (*rest)[len((*m)[0]):]
	return true
}

// lookup returns the value of the element of map name with key, or "".
func (tr *tracer) lookup(table *knftables.FakeTable, name string, key ...string) string {
	m := table.Maps[name]
	if m == nil {
		tr.t.Fatalf("no map %q", name)
	}
	for _, e := range m.Elements {
		if slices.Equal(normalizeKey(e.Key), key) {
			return strings.Join(e.Value, " . ")
		}
	}
	return ""
}

func normalizeKey(key []string) []string {
	out := slices.Clone(key)
	for i, k := range out {
		if a, err := netip.ParseAddr(k); err == nil {
			out[i] = a.String()
		}
	}
	return out
}

func inPrefixes(t *testing.T, a netip.Addr, set string) bool {
	for _, item := range strings.Split(set, ", ") {
		p, err := netip.ParsePrefix(item)
		if err != nil {
			addr, err2 := netip.ParseAddr(item)
			if err2 != nil {
				t.Fatalf("bad set item %q: %v", item, err)
			}
			p = netip.PrefixFrom(addr, addr.BitLen())
		}
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// dnat applies `dnat to jhash ... map @bucket-map` (elements "bucket :
// addr . port"), `... map @group-map : port` (elements "bucket : addr"),
// or a group chain's `jhash saddr . sport . daddr . dport ... map
// @group-map : ip daddr . meta l4proto . th dport map @node-ports`; false
// when a lookup finds no element (the kernel's lookup fails and the rule
// does not match).
func (tr *tracer) dnat(table *knftables.FakeTable, f *flow, m []string) bool {
	modulus, _ := strconv.ParseUint(m[5], 10, 32)
	seed, _ := strconv.ParseUint(m[6], 0, 32)
	var dst netip.Addr
	if m[4] != "" {
		dst = f.dst
	}
	bucket := jhashBucket(f.src, f.sport, m[3] != "", dst, f.dport, uint32(seed), uint32(modulus))
	v := tr.lookup(table, m[7], strconv.Itoa(int(bucket)))
	if v == "" {
		return false
	}
	addr, port, ok := strings.Cut(v, " . ")
	switch {
	case m[9] != "":
		addr, port, ok = v, m[9], !ok
	case m[11] != "":
		port = tr.lookup(table, m[11], f.dst.String(), f.proto, strconv.Itoa(int(f.dport)))
		addr, ok = v, !ok && port != ""
	}
	if !ok {
		tr.t.Fatalf("bad map value %q (or no NodePort for it)", v)
	}
	p, _ := strconv.ParseUint(port, 10, 16)
	f.dst, f.dport, f.dnatted = netip.MustParseAddr(addr), uint16(p), true
	return true
}

// jhashBucket computes what `jhash ip saddr [. th sport] [. ip daddr . th
// dport] mod N seed S` gives in the kernel (nft_jhash_eval): the
// concatenation is laid out in 32-bit registers (the ports zero-padded),
// hashed with jhash, and scaled to N by reciprocal_scale. dst is left out
// when it is the zero Addr.
func jhashBucket(src netip.Addr, sport uint16, withPort bool, dst netip.Addr, dport uint16, seed, modulus uint32) uint32 {
	port := func(p uint16) []byte {
		var reg [4]byte
		binary.BigEndian.PutUint16(reg[:], p)
		return reg[:]
	}
	data := src.AsSlice()
	if withPort {
		data = append(data, port(sport)...)
	}
	if dst.IsValid() {
		data = append(append(data, dst.AsSlice()...), port(dport)...)
	}
	h := jhash(data, seed)
	return uint32((uint64(h) * uint64(modulus)) >> 32)
}

// jhash is the kernel's jhash (include/linux/jhash.h, Bob Jenkins' lookup3)
// on a little-endian machine.
func jhash(k []byte, initval uint32) uint32 {
	rol := bits.RotateLeft32
	a := 0xdeadbeef + uint32(len(k)) + initval
	b, c := a, a
	for len(k) > 12 {
		a += binary.LittleEndian.Uint32(k)
		b += binary.LittleEndian.Uint32(k[4:])
		c += binary.LittleEndian.Uint32(k[8:])
		a -= c
		a ^= rol(c, 4)
		c += b
		b -= a
		b ^= rol(a, 6)
		a += c
		c -= b
		c ^= rol(b, 8)
		b += a
		a -= c
		a ^= rol(c, 16)
		c += b
		b -= a
		b ^= rol(a, 19)
		a += c
		c -= b
		c ^= rol(b, 4)
		b += a
		k = k[12:]
	}
	if len(k) == 0 {
		return c
	}
	var tail [12]byte
	copy(tail[:], k)
	a += binary.LittleEndian.Uint32(tail[0:])
	b += binary.LittleEndian.Uint32(tail[4:])
	c += binary.LittleEndian.Uint32(tail[8:])
	c ^= b
	c -= rol(b, 14)
	a ^= c
	a -= rol(c, 11)
	b ^= a
	b -= rol(a, 25)
	c ^= b
	c -= rol(b, 16)
	a ^= c
	a -= rol(c, 4)
	b ^= a
	b -= rol(a, 14)
	c ^= b
	c -= rol(b, 24)
	return c
}

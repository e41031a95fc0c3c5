package dataplane

import (
	"net/netip"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/knftables"
)

func withForwarding(f Forwarding) func(*Service) { return func(s *Service) { s.Forwarding = f } }

// passthroughState has a passthrough service beside a proxy one, one with
// source ranges and ClientIP affinity, one without a healthy backend, and
// node-d off the link.
func passthroughState() State {
	st := State{Interface: "eth0", Links: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("2001:db8::/64")}}
	st.Services = []Service{
		newService("shop/web", withVIPs("192.0.2.100", "2001:db8::100"), withForwarding(Passthrough),
			withPort(TCP, 80, 30080), withPort(UDP, 443, 30443),
			withBackend("node-a", true, nodeA...), withBackend("node-b", true, nodeB...), withBackend("node-c", true, nodeC...)),
		newService("shop/admin", withVIPs("192.0.2.102"), withForwarding(Passthrough), withAffinity(),
			withPort(TCP, 8443, 30843), withSourceRanges("198.51.100.0/24"),
			withBackend("node-a", true, nodeA...), withBackend("node-d", true, "198.51.100.14")),
		newService("shop/broken", withVIPs("192.0.2.103"), withForwarding(Passthrough),
			withPort(TCP, 80, 30081), withBackend("node-a", false, nodeA...)),
		newService("infra/dns", withVIPs("192.0.2.101"),
			withPort(UDP, 53, 30053), withBackend("node-a", true, nodeA...)),
	}
	return st
}

func newFakePassthroughSyncer() (*Syncer, *knftables.Fake, *knftables.Fake, *knftables.Fake) {
	v4 := knftables.NewFake(knftables.IPv4Family, TableName)
	v6 := knftables.NewFake(knftables.IPv6Family, TableName)
	nd := knftables.NewFake(knftables.NetDevFamily, TableName)
	return NewSyncer(v4, v6, nd, nil), v4, v6, nd
}

func TestPassthroughFullSyncGolden(t *testing.T) {
	s, v4, v6, nd := newFakePassthroughSyncer()
	mustSync(t, s, passthroughState())
	checkGolden(t, "passthrough-full-sync", transactions(v4, v6)+nd.LastTransaction.String())
}

// bucketVerdicts returns the verdict of each bucket of the map that a rule
// made by bucketRule looks up in nd, counted: "accept" or the node chain's
// name.
func bucketVerdicts(t *testing.T, nd *Table, rule string) map[string]int {
	t.Helper()
	m := regexp.MustCompile(`vmap @(\S+)$`).FindStringSubmatch(rule)
	if m == nil {
		t.Fatalf("no bucket map in %q", rule)
	}
	bm := nd.Maps[m[1]]
	if bm == nil {
		t.Fatalf("no map %q", m[1])
	}
	out := map[string]int{}
	for _, key := range bm.keys() {
		e, _ := bm.element(key)
		out[strings.TrimPrefix(strings.Join(e.Value, " . "), "goto ")]++
	}
	return out
}

func TestPassthroughBuckets(t *testing.T) {
	web := Port{Protocol: TCP, Port: 80}
	count := func(backends ...Backend) map[string]int {
		out := map[string]int{}
		for _, n := range Assign("shop/web", backends) {
			out[n]++
		}
		return out
	}
	a := Backend{Node: "node-a", Healthy: true}
	b := Backend{Node: "node-b", Healthy: true}
	c := Backend{Node: "node-c", Healthy: true}
	tests := []struct {
		name string
		st   func(State) State
		fam  family
		want map[string]int // by node chain or "accept"
	}{{
		name: "buckets as Assign gives them",
		st:   func(s State) State { return s },
		fam:  ipv4,
		want: renameCounts(count(a, b, c), ipv4, ""),
	}, {
		name: "IPv6: node-c has no IPv6 address",
		st:   func(s State) State { return s },
		fam:  ipv6,
		want: renameCounts(count(a, b), ipv6, ""),
	}, {
		name: "the host's own node keeps its buckets and accepts them",
		st:   func(s State) State { s.Self = "node-b"; return s },
		fam:  ipv4,
		want: renameCounts(count(a, b, c), ipv4, "node-b"),
	}, {
		name: "an unhealthy node gets none",
		st:   func(s State) State { return withHealthKeep(s, "node-c", false) },
		fam:  ipv4,
		want: renameCounts(count(a, b, Backend{Node: "node-c"}), ipv4, ""),
	}, {
		name: "a node off the link gets none",
		st: func(s State) State {
			// node-a and node-b only.
			s.Links = []netip.Prefix{netip.MustParsePrefix("192.0.2.11/32"), netip.MustParsePrefix("192.0.2.12/32")}
			return s
		},
		fam:  ipv4,
		want: renameCounts(count(a, b, Backend{Node: "node-c"}), ipv4, ""),
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.st(passthroughState())
			nd := Desired(st).NetDev
			c := nd.Chains[passthroughChainName(tc.fam, "shop/web", web)]
			if c == nil {
				t.Fatalf("no chain for shop/web; chains: %v", sortedKeys(nd.Chains))
			}
			if diff := cmp.Diff(tc.want, bucketVerdicts(t, nd, c.Rules[len(c.Rules)-1])); diff != "" {
				t.Errorf("buckets (-want +got):\n%s", diff)
			}
		})
	}
}

// renameCounts turns bucket counts by node into counts by verdict.
func renameCounts(byNode map[string]int, f family, self string) map[string]int {
	out := map[string]int{}
	for n, c := range byNode {
		if n == self {
			out["accept"] += c
		} else {
			out[nodeChainName(f, n)] += c
		}
	}
	return out
}

// withHealthKeep is withHealth keeping the rest of the State.
func withHealthKeep(s State, node string, healthy bool) State {
	out := withHealth(s, node, healthy)
	out.Interface, out.Links, out.Self = s.Interface, s.Links, s.Self
	return out
}

func TestPassthroughChecks(t *testing.T) {
	st := passthroughState()
	r := Desired(st)
	nd, v4 := r.NetDev, r.IPv4

	if c := nd.Chains[ingressChainName("eth0")]; c == nil || c.Base == nil || c.Base.Hook != knftables.IngressHook || c.Base.Device != "eth0" {
		t.Errorf("no ingress base chain on eth0: %+v", c)
	}
	// shop/broken has no healthy node: not in the netdev dispatch, rejected
	// by the ip table; shop/web and shop/admin are not DNATed there.
	if _, ok := nd.Maps[mapPassthroughPorts4].Elements["192.0.2.103 . tcp . 80"]; ok {
		t.Errorf("shop/broken is forwarded without a healthy node")
	}
	if _, ok := v4.Maps[mapNoEndpoints].Elements["192.0.2.103 . tcp . 80"]; !ok {
		t.Errorf("shop/broken is not rejected by the ip table")
	}
	for key := range v4.Maps[mapServicePorts].Elements {
		if key != "192.0.2.101 . udp . 53" {
			t.Errorf("ip table DNATs passthrough frontend %s", key)
		}
	}
	// shop/admin: source ranges dropped before forwarding; node-d is off
	// the link: reported, and no chain forwards to it.
	admin := nd.Chains[passthroughChainName(ipv4, "shop/admin", Port{Protocol: TCP, Port: 8443})]
	if admin == nil || admin.Rules[0] != "ip saddr != { 198.51.100.0/24 } drop" {
		t.Errorf("shop/admin chain does not drop other sources first: %+v", admin)
	}
	if !strings.Contains(admin.Rules[1], "jhash ip saddr mod 128") {
		t.Errorf("ClientIP affinity does not hash the address only: %q", admin.Rules[1])
	}
	if _, ok := nd.Chains[nodeChainName(ipv4, "node-d")]; ok {
		t.Errorf("a chain forwards to node-d, which is off the link")
	}
	probs := Problems(st)["shop/admin"]
	if len(probs) != 1 || !strings.Contains(probs[0].Error(), `backend "node-d": address 198.51.100.14 is on no link of interface eth0`) {
		t.Errorf("off-link node-d not reported: %v", probs)
	}

	// Without an interface, passthrough services are left out and reported.
	st.Interface = ""
	if nd := Desired(st).NetDev; len(nd.Chains) != 0 {
		t.Errorf("chains without an interface: %v", sortedKeys(nd.Chains))
	}
	if len(Problems(st)["shop/web"]) != 1 {
		t.Errorf("passthrough without an interface not reported: %v", Problems(st))
	}
}

// A node turning unhealthy moves its buckets: the partial sync deletes and
// adds those elements of the service's bucket map and removes the node's
// chain; no service chain is rewritten.
func TestPassthroughPartialSyncTouchesOnlyChangedService(t *testing.T) {
	s, _, _, nd := newFakePassthroughSyncer()
	before := Desired(passthroughState()).NetDev
	mustSync(t, s, passthroughState())
	mustSync(t, s, withHealthKeep(passthroughState(), "node-c", false))
	ops := parseOps(t, nd.LastTransaction.String())

	nodeC := nodeChainName(ipv4, "node-c")
	webMap := passthroughBucketMapName(ipv4, "shop/web")
	var moved []string
	for i, v := range bucketTexts(before.Maps[webMap]) {
		if v == "goto "+nodeC {
			moved = append(moved, bucketKey(i))
		}
	}
	if len(moved) == 0 {
		t.Fatalf("node-c has no bucket of shop/web before the change")
	}
	want := txOps{
		flushed:         []string{nodeC},
		deletedChains:   []string{nodeC},
		deletedElements: map[string][]string{webMap: moved},
		addedElements:   map[string][]string{webMap: moved},
	}
	if diff := cmp.Diff(want.sorted(), ops.sorted(), cmp.AllowUnexported(txOps{})); diff != "" {
		t.Errorf("partial sync (-want +got):\n%s", diff)
	}
}

func sortedCopy(s []string) []string {
	m := map[string]bool{}
	for _, x := range s {
		m[x] = true
	}
	return sortedKeys(m)
}

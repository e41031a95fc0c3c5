package dataplane

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// grouped puts every service of st in bucket group g.
func grouped(st State, g string) State {
	for i := range st.Services {
		st.Services[i].BucketGroup = g
	}
	return st
}

// The services of a bucket group share one map per family and one chain
// per protocol: service-ports sends their ports to the group's chain, whose
// rule takes the address from the group's map and the NodePort from
// node-ports. A service of the group whose backends differ, and one without
// a group, keep a chain and a map of their own.
func TestBucketGroupSharesOneMap(t *testing.T) {
	st := grouped(nodesState(20, "node-1", "node-2", "node-3"), "http:10256/healthz")
	odd := &st.Services[7]
	odd.Backends = odd.Backends[:2]
	st.Services[9].BucketGroup = ""
	st.Services[11].Affinity = true
	r := Desired(st)
	group := groupBucketMapName("http:10256/healthz")
	var maps []string
	for name, m := range r.IPv4.Maps {
		if m.Buckets != nil {
			maps = append(maps, name)
		}
	}
	want := []string{group, bucketMapName(odd.Name, odd.Ports[0]), bucketMapName(st.Services[9].Name, st.Services[9].Ports[0])}
	if diff := cmp.Diff(sortedStrings(want), sortedStrings(maps)); diff != "" {
		t.Errorf("bucket maps (-want +got):\n%s", diff)
	}
	if got := r.IPv4.Maps[group].TypeOf; got != "numgen inc mod 2 : ip daddr" {
		t.Errorf("group map typeof %q", got)
	}
	chain := groupChainName("http:10256/healthz", TCP, false)
	affinity := groupChainName("http:10256/healthz", TCP, true)
	for name, hash := range map[string]string{chain: "ip saddr . th sport . ip daddr . th dport", affinity: "ip saddr . ip daddr . th dport"} {
		c := r.IPv4.Chains[name]
		if c == nil {
			t.Fatalf("no group chain %s", name)
		}
		want := fmt.Sprintf("meta l4proto tcp dnat ip to jhash %s mod %d seed %#x map @%s : ip daddr . meta l4proto . th dport map @%s", hash, BucketCount, HashSeed, group, mapNodePorts)
		if len(c.Rules) != 1 || c.Rules[0] != want {
			t.Errorf("group chain %s: %q, want [%q]", name, c.Rules, want)
		}
	}
	for i, svc := range st.Services {
		key := fmt.Sprintf("%s . tcp . 80", svc.VIPs[0])
		target := r.IPv4.Maps[mapServicePorts].Elements[key].Value
		nodePort := r.IPv4.Maps[mapNodePorts].Elements[key].Value
		own := r.IPv4.Chains[serviceChainName(svc.Name, svc.Ports[0])]
		switch i {
		case 7, 9:
			if own == nil || !strings.HasSuffix(own.Rules[0], "map @"+bucketMapName(svc.Name, svc.Ports[0])) || nodePort != nil {
				t.Errorf("%s: chain %v, NodePort element %q; want a chain and a map of its own, no NodePort element", svc.Name, own, nodePort)
			}
		default:
			wantChain := chain
			if svc.Affinity {
				wantChain = affinity
			}
			if own != nil || !slices.Equal(target, []string{"goto " + wantChain}) || !slices.Equal(nodePort, []string{fmt.Sprint(svc.Ports[0].NodePort)}) {
				t.Errorf("%s: own chain %v, service-ports %q, node-ports %q; want no chain of its own, goto %s and %d",
					svc.Name, own, target, nodePort, wantChain, svc.Ports[0].NodePort)
			}
		}
	}
	for i := range BucketCount {
		if v := r.IPv4.Maps[group].Buckets.text(i); strings.Contains(v, " . ") {
			t.Fatalf("group map value %q carries a port", v)
		}
	}
}

// A node joining the backends of a group's services rewrites the moved
// elements of the group's one map: the transaction does not grow with the
// services.
func TestBucketGroupNodeChangeRewritesOneMap(t *testing.T) {
	const services = 200
	three := grouped(nodesState(services, "node-1", "node-2", "node-3"), "cluster")
	four := grouped(nodesState(services, "node-1", "node-2", "node-3", "node-4"), "cluster")
	s, v4, _, _ := newFakeSyncer()
	mustSync(t, s, three)
	mustSync(t, s, four)
	tx := v4.LastTransaction.String()
	group := groupBucketMapName("cluster")
	keys := movedKeys("group cluster", three.Services[0].Backends, four.Services[0].Backends)
	want := txOps{deletedElements: map[string][]string{group: keys}, addedElements: map[string][]string{group: keys}}
	if diff := cmp.Diff(want.sorted(), parseOps(t, tx).sorted(), cmp.AllowUnexported(txOps{})); diff != "" {
		t.Errorf("transaction for a new node (-want +got):\n%s", diff)
	}
	if n := v4.LastTransaction.NumOperations(); n == 0 || n > 2*BucketCount {
		t.Errorf("%d operations for a node change of %d services", n, services)
	}
	if got, want := dump(v4), freshV4Dump(t, four); got != want {
		t.Errorf("partial sync differs from a full sync:\n%s", cmp.Diff(want, got))
	}
}

// Through a group's map, flows reach the service's own NodePort on the
// node of their bucket, and the same client port lands in different
// buckets for different services of the group.
func TestBucketGroupPacketFlows(t *testing.T) {
	st := grouped(nodesState(2, "node-1", "node-2", "node-3"), "cluster")
	tr, _ := syncedTracer(t, st)
	a, b := st.Services[0], st.Services[1]
	assignment := Assign("group cluster", a.Backends)
	addrOf := map[string]string{}
	for _, be := range a.Backends {
		addrOf[be.Node] = be.Addrs[0].String()
	}
	differ := 0
	for sport := uint16(40000); sport < 40064; sport++ {
		for _, svc := range []Service{a, b} {
			v := tr.run(tcp("198.51.100.7", sport, svc.VIPs[0].String(), 80))
			bucket := jhashBucket(addr("198.51.100.7"), sport, true, svc.VIPs[0], 80, HashSeed, BucketCount)
			want := fmt.Sprintf("%s:%d", addrOf[assignment[bucket]], svc.Ports[0].NodePort)
			if v.dnat.String() != want {
				t.Fatalf("%s from port %d: %s, want DNAT to %s", svc.Name, sport, v, want)
			}
		}
		if jhashBucket(addr("198.51.100.7"), sport, true, a.VIPs[0], 80, HashSeed, BucketCount) !=
			jhashBucket(addr("198.51.100.7"), sport, true, b.VIPs[0], 80, HashSeed, BucketCount) {
			differ++
		}
	}
	if differ < 32 {
		t.Errorf("only %d of 64 client ports land in different buckets for two services of a group", differ)
	}
}

// Passthrough services of a group share one verdict map per family in the
// netdev table, and the node chains once.
func TestBucketGroupPassthrough(t *testing.T) {
	st := grouped(nodesState(20, "node-1", "node-2", "node-3"), "cluster")
	for i := range st.Services {
		st.Services[i].Forwarding = Passthrough
	}
	st.Interface = "eth0"
	r := Desired(st)
	var maps []string
	for name, m := range r.NetDev.Maps {
		if m.Buckets != nil {
			maps = append(maps, name)
		}
	}
	if diff := cmp.Diff([]string{passthroughGroupMapName(ipv4, "cluster")}, maps); diff != "" {
		t.Errorf("netdev bucket maps (-want +got):\n%s", diff)
	}
	for _, svc := range st.Services {
		rule := r.NetDev.Chains[passthroughChainName(ipv4, svc.Name, svc.Ports[0])].Rules[0]
		if want := fmt.Sprintf("seed %#x vmap @%s", serviceSeed(svc.Name), passthroughGroupMapName(ipv4, "cluster")); !strings.HasSuffix(rule, want) {
			t.Errorf("%s: rule %q, want it to end in %q", svc.Name, rule, want)
		}
	}
}

func sortedStrings(s []string) []string { return slices.Sorted(slices.Values(s)) }

// A node without an address of a family gets none of that family's flows,
// for the services of a group and for one with a map of its own.
func TestFamilyWithoutAddressGetsNoFlows(t *testing.T) {
	backends := []Backend{
		{Node: "node-1", Healthy: true, Addrs: addrs("192.0.2.11", "2001:db8::11")},
		{Node: "node-2", Healthy: true, Addrs: addrs("192.0.2.12")},
	}
	var st State
	for i, group := range []string{"cluster", "cluster", ""} {
		st.Services = append(st.Services, Service{
			Name: fmt.Sprintf("ns/svc-%d", i), BucketGroup: group, Backends: backends,
			VIPs:  addrs(fmt.Sprintf("198.51.100.%d", 10+i), fmt.Sprintf("2001:db8:1::%d", 10+i)),
			Ports: []Port{{Protocol: TCP, Port: 80, NodePort: uint16(30080 + i)}},
		})
	}
	tr, _ := syncedTracer(t, st)
	for _, svc := range st.Services {
		to := map[string]int{}
		for sport := uint16(40000); sport < 40064; sport++ {
			to[tr.run(tcp("2001:db8:2::7", sport, svc.VIPs[1].String(), 80)).dnat.Addr().String()]++
			to[tr.run(tcp("203.0.113.7", sport, svc.VIPs[0].String(), 80)).dnat.Addr().String()]++
		}
		if to["2001:db8::11"] != 64 || to["192.0.2.11"] == 0 || to["192.0.2.12"] == 0 {
			t.Errorf("%s: flows by node address %v; want every IPv6 flow at node-1 and IPv4 flows at both", svc.Name, to)
		}
	}
}

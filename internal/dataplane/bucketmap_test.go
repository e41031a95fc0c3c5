package dataplane

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/knftables"
)

// txOps is a transaction's operations, by kind, as parseOps reads them.
type txOps struct {
	addedChains, flushed, deletedChains []string
	rules                               []string // chains that get a rule
	maps                                []string // "add map", "flush map", "delete map" lines
	deletedElements, addedElements      map[string][]string
	other                               []string
}

var opLine = strings.NewReplacer("{ ", "", " }", "")

// parseOps reads the text of one family's transaction.
func parseOps(t *testing.T, tx string) txOps {
	t.Helper()
	ops := txOps{deletedElements: map[string][]string{}, addedElements: map[string][]string{}}
	for _, line := range strings.Split(strings.TrimSpace(tx), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			ops.other = append(ops.other, line)
			continue
		}
		name := f[4]
		switch verb := f[0] + " " + f[1]; verb {
		case "add chain":
			ops.addedChains = append(ops.addedChains, name)
		case "flush chain":
			ops.flushed = append(ops.flushed, name)
		case "delete chain":
			ops.deletedChains = append(ops.deletedChains, name)
		case "add rule":
			ops.rules = append(ops.rules, name)
		case "add map", "flush map", "delete map":
			ops.maps = append(ops.maps, verb+" "+name)
		case "add element", "delete element":
			_, rest, _ := strings.Cut(line, " "+name+" ")
			key, _, _ := strings.Cut(opLine.Replace(rest), " : ")
			if f[0] == "add" {
				ops.addedElements[name] = append(ops.addedElements[name], key)
			} else {
				ops.deletedElements[name] = append(ops.deletedElements[name], key)
			}
		default:
			ops.other = append(ops.other, line)
		}
	}
	return ops
}

// sorted returns ops with every list sorted, for comparing.
func (o txOps) sorted() txOps {
	for _, l := range []*[]string{&o.addedChains, &o.flushed, &o.deletedChains, &o.rules, &o.maps, &o.other} {
		*l = slices.Sorted(slices.Values(*l))
	}
	for _, m := range []map[string][]string{o.deletedElements, o.addedElements} {
		for k, v := range m {
			m[k] = slices.Sorted(slices.Values(v))
		}
	}
	return o
}

// nodesState is n services of one TCP port each over the given nodes.
func nodesState(services int, nodes ...string) State {
	var st State
	for i := range services {
		svc := Service{
			Name:  fmt.Sprintf("ns/svc-%d", i),
			VIPs:  []netip.Addr{netip.AddrFrom4([4]byte{10, 0, byte(i / 250), byte(1 + i%250)})},
			Ports: []Port{{Name: "http", Protocol: TCP, Port: 80, NodePort: uint16(30000 + i)}},
		}
		for j, n := range nodes {
			svc.Backends = append(svc.Backends, Backend{Node: n, Addrs: []netip.Addr{netip.AddrFrom4([4]byte{192, 0, 2, byte(11 + j)})}, Healthy: true})
		}
		st.Services = append(st.Services, svc)
	}
	return st
}

// A node joining the backends of every service costs a transaction of
// bucket map elements only: the buckets that move to the new node are
// deleted and added again, no chain or rule is rewritten.
func TestNodeChangeRewritesOnlyMovedBuckets(t *testing.T) {
	const services = 200
	three := nodesState(services, "node-1", "node-2", "node-3")
	four := nodesState(services, "node-1", "node-2", "node-3", "node-4")
	s, v4, _, _ := newFakeSyncer()
	mustSync(t, s, three)
	full := v4.LastTransaction
	mustSync(t, s, four)
	tx := v4.LastTransaction.String()
	t.Logf("full sync at 3 nodes: %d operations, %d bytes; node added: %d operations, %d bytes",
		full.NumOperations(), len(full.String()), v4.LastTransaction.NumOperations(), len(tx))

	want := txOps{deletedElements: map[string][]string{}, addedElements: map[string][]string{}}
	moved := 0
	for _, svc := range four.Services {
		keys := movedKeys(svc.Name, three.Services[0].Backends, svc.Backends)
		if len(keys) > 0 {
			name := bucketMapName(svc.Name, svc.Ports[0])
			want.deletedElements[name], want.addedElements[name] = keys, keys
			moved += len(keys)
		}
	}
	got := parseOps(t, tx)
	if diff := cmp.Diff(want.sorted(), got.sorted(), cmp.AllowUnexported(txOps{})); diff != "" {
		t.Errorf("transaction for a new node (-want +got):\n%s", diff)
	}
	// About a quarter of the buckets move to the new node, none between the
	// others (Assign's property, checked in buckets_test.go).
	if n := v4.LastTransaction.NumOperations(); n != 2*moved || moved > services*BucketCount/3 {
		t.Errorf("%d operations for %d moved buckets of %d", n, moved, services*BucketCount)
	}
	if got, want := dump(v4), freshV4Dump(t, four); got != want {
		t.Errorf("partial sync differs from a full sync:\n%s", cmp.Diff(want, got))
	}
}

func freshV4Dump(t *testing.T, st State) string {
	t.Helper()
	s, v4, _, _ := newFakeSyncer()
	mustSync(t, s, st)
	return dump(v4)
}

// The bucket maps of services over the same backends share one list of
// choices, the ports of a service share one index, and a sync without
// change keeps both (so the applied and the desired ruleset compare
// without looking at a bucket).
func TestBucketMapsShareChoices(t *testing.T) {
	st := scaleState(50, 8, "")
	for i := range st.Services {
		st.Services[i].Ports = append(st.Services[i].Ports, Port{Protocol: UDP, Port: 53, NodePort: uint16(40000 + i)})
	}
	services, _ := normalize(st)
	m := newAssignMemo()
	first, second := desired(services, m, Counting{}), desired(services, m, Counting{})

	choices := map[*BucketChoices]bool{}
	for _, svc := range st.Services {
		tcp := second.IPv4.Maps[bucketMapName(svc.Name, svc.Ports[0])].Buckets
		udp := second.IPv4.Maps[bucketMapName(svc.Name, svc.Ports[1])].Buckets
		choices[tcp.Choices], choices[udp.Choices] = true, true
		if tcp.Index != udp.Index {
			t.Errorf("%s: the ports' bucket maps have two indexes", svc.Name)
		}
		if before := first.IPv4.Maps[bucketMapName(svc.Name, svc.Ports[0])].Buckets; before.Index != tcp.Index || before.Choices != tcp.Choices {
			t.Errorf("%s: a sync without change made a new index or choices", svc.Name)
		}
	}
	if len(choices) != 1 {
		t.Errorf("%d lists of choices for services over the same backends, want 1", len(choices))
	}
}

// A service with more backends than a byte counts gets the same buckets:
// its index then points into the backends that got one.
func TestBucketMapManyBackends(t *testing.T) {
	backends := memoBackends(300, 7, 150)
	st := State{Services: []Service{{
		Name:     "ns/big",
		VIPs:     []netip.Addr{netip.MustParseAddr("192.0.2.100")},
		Ports:    []Port{{Protocol: TCP, Port: 80, NodePort: 30080}},
		Backends: backends,
	}}}
	a := Assign("ns/big", backends)
	var want []string
	for _, node := range a {
		i := slices.IndexFunc(backends, func(b Backend) bool { return b.Node == node })
		want = append(want, backends[i].Addrs[0].String()+" . 30080")
	}
	services, _ := normalize(st)
	for name, r := range map[string]Ruleset{"without memo": Desired(st), "with memo": desired(services, newAssignMemo(), Counting{})} {
		got := bucketTexts(r.IPv4.Maps[bucketMapName("ns/big", st.Services[0].Ports[0])])
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: bucket values (-want +got):\n%s", name, diff)
		}
	}
}

// With batch, a node change writes one delete and one add per bucket map
// whose buckets moved, each listing exactly the moved buckets, instead of
// one command per moved bucket.
func TestNodeChangeBatchedPerMap(t *testing.T) {
	const services = 50
	three := nodesState(services, "node-1", "node-2", "node-3")
	four := nodesState(services, "node-1", "node-2", "node-3", "node-4")
	applied, desired := Desired(three).IPv4, Desired(four).IPv4
	tx := knftables.NewFake(knftables.IPv4Family, TableName).NewTransaction()
	PartialSync(tx, applied, desired, true)

	deleted, added := map[string][]string{}, map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(tx.String()), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || f[1] != "element" {
			t.Fatalf("not an element operation: %q", line)
		}
		name := f[4]
		list := strings.TrimSuffix(strings.TrimPrefix(strings.Join(f[5:], " "), "{ "), " }")
		switch f[0] {
		case "delete":
			if _, dup := deleted[name]; dup {
				t.Errorf("map %s: two delete commands", name)
			}
			deleted[name] = strings.Split(list, ", ")
		case "add":
			if _, dup := added[name]; dup {
				t.Errorf("map %s: two add commands", name)
			}
			for _, e := range strings.Split(list, ", ") {
				key, value, _ := strings.Cut(e, " : ")
				added[name] = append(added[name], key)
				i, _ := strconv.Atoi(key)
				if want := desired.Maps[name].Buckets.text(i); value != want {
					t.Errorf("map %s bucket %s: value %q, want %q", name, key, value, want)
				}
			}
		}
	}
	maps := 0
	for _, svc := range four.Services {
		keys := movedKeys(svc.Name, three.Services[0].Backends, svc.Backends)
		name := bucketMapName(svc.Name, svc.Ports[0])
		if len(keys) > 0 {
			maps++
		}
		if !slices.Equal(deleted[name], keys) || !slices.Equal(added[name], keys) {
			t.Errorf("map %s: deleted %v, added %v, want %v moved", name, deleted[name], added[name], keys)
		}
	}
	if n := tx.NumOperations(); n != 2*maps || maps == 0 {
		t.Errorf("%d operations for %d maps with moved buckets, want two each", n, maps)
	}
}

// movedKeys are the keys of the buckets of service whose backend Assign
// changes from before to after.
func movedKeys(service string, before, after []Backend) []string {
	a, b := Assign(service, before), Assign(service, after)
	var keys []string
	for i := range a {
		if a[i] != b[i] {
			keys = append(keys, bucketKey(i))
		}
	}
	return keys
}

package dataplane

import (
	"fmt"
	"net/netip"
	"reflect"
	"testing"
)

func memoBackends(n int, unhealthy ...int) []Backend {
	var out []Backend
	for i := range n {
		out = append(out, Backend{Node: fmt.Sprintf("node-%03d", i), Healthy: true, Addrs: []netip.Addr{netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})}})
	}
	for _, i := range unhealthy {
		out[i].Healthy = false
	}
	return out
}

func TestAssignMemo(t *testing.T) {
	m := newAssignMemo()
	for _, step := range []struct {
		name     string
		backends []Backend
	}{
		{"first", memoBackends(5)},
		{"same again", memoBackends(5)},
		{"one unhealthy", memoBackends(5, 2)},
		{"one more node", memoBackends(6, 2)},
		{"healthy again", memoBackends(6)},
	} {
		t.Run(step.name, func(t *testing.T) {
			if got, want := expand(m.assign("ip demo/web", "demo/web", ipv4, step.backends)), Assign("demo/web", step.backends); got != want {
				t.Errorf("memo gives %v, Assign %v", got, want)
			}
			m.sweep()
		})
	}
	m.sweep() // nothing asked since the last sweep
	if len(m.entries) != 0 || len(m.backendSets) != 0 {
		t.Errorf("sweep kept %d entries and %d backend sets", len(m.entries), len(m.backendSets))
	}
}

// TestDesiredMemoMatches checks that a Syncer's memo never changes the
// ruleset (chains, bucket maps and the plain maps' elements), across
// health changes, a node moving to another address under the same name, a
// NodePort changing, session affinity, services joining and leaving a
// bucket group and services going away; and that it forgets what the last
// sync did not use.
func TestDesiredMemoMatches(t *testing.T) {
	m := newAssignMemo()
	for _, step := range []struct {
		unhealthy []int
		moved     bool // node-002 has another address
		nodePort  uint16
		affinity  bool
		group     string
		services  int
	}{
		{nil, false, 30000, false, "", 20}, {[]int{1}, false, 30000, false, "", 20}, {[]int{1, 3}, false, 30000, false, "", 20},
		{nil, false, 30000, false, "", 20}, {nil, true, 30000, false, "", 20}, {nil, true, 31000, false, "", 20},
		{nil, false, 31000, false, "", 20}, {nil, false, 31000, true, "", 20}, {nil, false, 31000, true, "g", 20},
		{nil, false, 31000, false, "g", 20}, {nil, false, 31000, false, "", 12},
	} {
		st := State{}
		for i := range step.services {
			backends := memoBackends(8, step.unhealthy...)
			if step.moved {
				backends[2].Addrs = []netip.Addr{netip.MustParseAddr("10.9.9.9")}
			}
			st.Services = append(st.Services, Service{
				Name:        fmt.Sprintf("ns/svc-%d", i),
				VIPs:        []netip.Addr{netip.AddrFrom4([4]byte{192, 0, 2, byte(100 + i)})},
				Ports:       []Port{{Protocol: TCP, Port: 80, NodePort: step.nodePort + uint16(i)}},
				Backends:    backends,
				Affinity:    step.affinity,
				BucketGroup: step.group,
			})
		}
		services, _ := normalize(st)
		got, want := desired(services, m, Counting{}), Desired(st)
		if len(got.IPv4.Chains) != len(want.IPv4.Chains) {
			t.Fatalf("%+v: %d chains with the memo, %d without", step, len(got.IPv4.Chains), len(want.IPv4.Chains))
		}
		for name, c := range want.IPv4.Chains {
			if !c.equal(got.IPv4.Chains[name]) {
				t.Fatalf("%+v: chain %s differs with the memo", step, name)
			}
		}
		texts := step.services // each with a chain and map of its own
		if step.group != "" {
			texts = 0 // the group's chain
		}
		if len(m.texts) != texts {
			t.Fatalf("%+v: the memo holds the text of %d ports, want %d", step, len(m.texts), texts)
		}
		if len(m.frontends) != step.services { // one frontend each
			t.Fatalf("%+v: the memo holds the elements of %d frontends, want %d", step, len(m.frontends), step.services)
		}
		for name, mp := range want.IPv4.Maps {
			if !reflect.DeepEqual(mp, got.IPv4.Maps[name]) {
				t.Fatalf("%+v: map %s differs with the memo:\nwant %+v\ngot  %+v", step, name, mp, got.IPv4.Maps[name])
			}
		}
	}
}

// BenchmarkDesired1000x100 is one sync's computation for 1,000 services
// on 100 nodes, with the memo a Syncer keeps (nothing changed since the
// last sync) and without.
func BenchmarkDesired1000x100(b *testing.B) {
	st := State{}
	for i := range 1000 {
		st.Services = append(st.Services, Service{
			Name:     fmt.Sprintf("scale/svc-%04d", i),
			VIPs:     []netip.Addr{netip.AddrFrom4([4]byte{100, 64, byte(16 + i/256), byte(i)})},
			Ports:    []Port{{Protocol: TCP, Port: 80, NodePort: uint16(20000 + i)}},
			Backends: memoBackends(100),
		})
	}
	b.Run("memo", func(b *testing.B) {
		m := newAssignMemo()
		services, _ := normalize(st)
		desired(services, m, Counting{}) // as the sync before
		for b.Loop() {
			services, _ := normalize(st)
			desired(services, m, Counting{})
		}
	})
	b.Run("none", func(b *testing.B) {
		for b.Loop() {
			Desired(st)
		}
	})
}

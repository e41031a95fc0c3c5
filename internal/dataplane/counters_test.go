package dataplane

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/knftables"
)

var countAll = Counting{Frontends: true, Nodes: true}

func TestCountersGolden(t *testing.T) {
	s, v4, v6, _ := newFakeSyncer()
	s.CountTraffic(countAll)
	mustSync(t, s, realisticState())
	checkGolden(t, "full-sync-counters", transactions(v4, v6))

	s, v4, v6, nd := newFakePassthroughSyncer()
	s.CountTraffic(countAll)
	mustSync(t, s, passthroughState())
	checkGolden(t, "passthrough-full-sync-counters", transactions(v4, v6)+nd.LastTransaction.String())
}

// counterNames lists what the counters of a table count, sorted.
func counterNames(tab *Table) []string {
	var out []string
	for _, c := range tab.Counters {
		out = append(out, strings.Join([]string{string(c.Kind), c.Service, c.VIP.String(), c.Protocol.nft(), itoa(c.Port), c.Node}, " "))
	}
	slices.Sort(out)
	return out
}

func itoa(p uint16) string { return bucketKey(int(p)) }

func TestDesiredCounters(t *testing.T) {
	st := State{Services: []Service{
		newService("shop/web", withVIPs("192.0.2.100"), withPort(TCP, 80, 30080),
			withBackend("node-a", true, nodeA...), withBackend("node-b", false, nodeB...)),
		newService("shop/dual", withVIPs("192.0.2.101", "2001:db8::101"), withPort(UDP, 53, 30053),
			withBackend("node-a", true, "192.0.2.11")),
	}}
	tests := []struct {
		name     string
		counting Counting
		want4    []string
		want6    []string
	}{
		{name: "off"},
		{
			name: "frontends", counting: Counting{Frontends: true},
			want4: []string{"received shop/dual 192.0.2.101 udp 53 ", "received shop/web 192.0.2.100 tcp 80 "},
			want6: []string{"received shop/dual 2001:db8::101 udp 53 "},
		},
		{
			name: "nodes, healthy or not, of the VIP's family", counting: Counting{Nodes: true},
			want4: []string{
				"connections shop/dual 192.0.2.101 udp 53 node-a",
				"connections shop/web 192.0.2.100 tcp 80 node-a", "connections shop/web 192.0.2.100 tcp 80 node-b",
			},
		},
		{
			name: "both", counting: countAll,
			want4: []string{
				"connections shop/dual 192.0.2.101 udp 53 node-a",
				"connections shop/web 192.0.2.100 tcp 80 node-a", "connections shop/web 192.0.2.100 tcp 80 node-b",
				"received shop/dual 192.0.2.101 udp 53 ", "received shop/web 192.0.2.100 tcp 80 ",
			},
			want6: []string{"received shop/dual 2001:db8::101 udp 53 "},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			services, _ := normalize(st)
			r := desired(services, nil, tt.counting)
			if diff := cmp.Diff(tt.want4, counterNames(r.IPv4)); diff != "" {
				t.Errorf("ip counters (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want6, counterNames(r.IPv6)); diff != "" {
				t.Errorf("ip6 counters (-want +got):\n%s", diff)
			}
			// Every counter a map names exists, and every counter is named.
			for _, tab := range []*Table{r.IPv4, r.IPv6} {
				named := map[string]bool{}
				for _, m := range []string{mapTraffic, mapNodeConnections} {
					if tab.Maps[m] == nil {
						continue
					}
					for _, e := range tab.Maps[m].Elements {
						named[strings.Trim(e.Value[0], `"`)] = true
					}
				}
				if diff := cmp.Diff(sortedKeys(tab.Counters), sortedKeys(named)); diff != "" {
					t.Errorf("%s: counters (-made +named by maps):\n%s", tab.Family, diff)
				}
			}
		})
	}
}

// TestCountersSurviveSyncs: a counter's values go on across partial and
// full syncs, and the counter goes with its frontend.
func TestCountersSurviveSyncs(t *testing.T) {
	ctx := context.Background()
	s, v4, _, _ := newFakeSyncer()
	s.CountTraffic(countAll)
	st := realisticState()
	mustSync(t, s, st)

	web := receivedCounter("shop/web", frontend{vip: addr("192.0.2.100"), port: Port{Protocol: TCP, Port: 80, NodePort: 30080}})
	setFakeCounter(t, v4, web.Name, 7, 700)

	steps := []struct {
		name string
		do   func()
	}{
		{"partial sync, node-b unhealthy", func() { mustSync(t, s, withHealth(st, "node-b", false)) }},
		{"partial sync, another service", func() {
			st.Services = append(st.Services, newService("shop/new", withVIPs("192.0.2.110"), withPort(TCP, 80, 30110),
				withBackend("node-a", true, nodeA...)))
			mustSync(t, s, st)
		}},
		{"full sync", func() { s.ForceFullSync(); mustSync(t, s, st) }},
	}
	for _, step := range steps {
		step.do()
		got := readingOf(t, s, web.Name)
		if got.Packets != 7 || got.Bytes != 700 || got.Service != "shop/web" || got.Port != 80 {
			t.Fatalf("after %s: %s reads %+v, want 7 packets, 700 bytes of shop/web port 80", step.name, web.Name, got)
		}
	}

	st.Services = slices.DeleteFunc(st.Services, func(svc Service) bool { return svc.Name == "shop/web" })
	mustSync(t, s, st)
	if _, ok := v4.Table.Counters[web.Name]; ok {
		t.Errorf("counter %s is still in the table after its service went", web.Name)
	}
	readings, err := s.ReadCounters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range readings {
		if r.Service == "shop/web" {
			t.Errorf("ReadCounters returned %+v of a removed service", r)
		}
	}
}

// TestCountersOffRemovesThem: a Syncer that stops counting removes its
// counters and their maps on the next full sync.
func TestCountersOffRemovesThem(t *testing.T) {
	s, v4, _, _ := newFakeSyncer()
	s.CountTraffic(countAll)
	mustSync(t, s, realisticState())
	fresh := NewSyncer(v4, nil, nil, nil)
	mustSync(t, fresh, realisticState())
	if n := len(v4.Table.Counters); n != 0 {
		t.Errorf("%d counters left after a full sync without counting", n)
	}
	if v4.Table.Maps[mapTraffic] != nil || v4.Table.Maps[mapNodeConnections] != nil {
		t.Errorf("counter maps left after a full sync without counting")
	}
}

func setFakeCounter(t *testing.T, fake *knftables.Fake, name string, packets, bytes uint64) {
	t.Helper()
	c, ok := fake.Table.Counters[name]
	if !ok {
		t.Fatalf("no counter %s in the table", name)
	}
	c.Packets, c.Bytes = &packets, &bytes
}

func readingOf(t *testing.T, s *Syncer, name string) CounterReading {
	t.Helper()
	readings, err := s.ReadCounters(context.Background())
	if err != nil {
		t.Fatalf("ReadCounters: %v", err)
	}
	for _, r := range readings {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("ReadCounters returned no %s", name)
	return CounterReading{}
}

// TestCountersMemo: the memo's counters and elements are those made
// without it, on the sync that makes them and on the next.
func TestCountersMemo(t *testing.T) {
	services, _ := normalize(passthroughState())
	more, _ := normalize(realisticState())
	services = append(services, more...)
	want := desired(services, nil, countAll)
	m := newAssignMemo()
	for i := range 2 {
		got := desired(services, m, countAll)
		for _, f := range families {
			w, g := want.Table(f), got.Table(f)
			if diff := cmp.Diff(w.Counters, g.Counters, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("sync %d, %s: counters (-without memo +with):\n%s", i, f, diff)
			}
			for _, name := range []string{mapTraffic, mapPassthroughTraffic4, mapPassthroughTraffic6} {
				if w.Maps[name] == nil {
					continue
				}
				if diff := cmp.Diff(w.Maps[name].Elements, g.Maps[name].Elements); diff != "" {
					t.Errorf("sync %d, %s %s (-without memo +with):\n%s", i, f, name, diff)
				}
			}
		}
	}
}

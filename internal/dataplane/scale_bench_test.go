package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"runtime"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

// discardNFT accepts every transaction and keeps nothing, so that only what
// the Syncer itself holds stays on the heap.
type discardNFT struct{ *knftables.Fake }

func (discardNFT) Run(context.Context, *knftables.Transaction) error { return nil }

func (discardNFT) ListAll(context.Context) (map[string][]string, error) { return nil, nil }

// scaleState is services of one TCP port each over the same backends (one
// list shared by every service, as the agent's Translate shares it), IPv4,
// in one bucket group as the agent puts Services with externalTrafficPolicy
// Cluster (group "": a map per service, as for Local).
func scaleState(services, nodes int, group string) State {
	backends := memoBackends(nodes)
	st := State{}
	for i := range services {
		st.Services = append(st.Services, Service{
			Name:        fmt.Sprintf("scale/svc-%04d", i),
			VIPs:        []netip.Addr{netip.AddrFrom4([4]byte{100, 64 + byte(i>>16), byte(i >> 8), byte(i)})},
			Ports:       []Port{{Protocol: TCP, Port: 80, NodePort: uint16(20000 + i)}},
			Backends:    backends,
			BucketGroup: group,
		})
	}
	return st
}

// BenchmarkSyncerHeld5000x100 reports the live heap a Syncer holds after
// two syncs of 5,000 services on 100 nodes (the applied Ruleset and the
// memo; the State is allocated before the first measurement), as
// held-MB, and the same per service as held-B/service: on a dedicated
// host and on a host that is one of the nodes (State.Self, whose buckets
// go to the others).
func BenchmarkSyncerHeld5000x100(b *testing.B) {
	const services = 5000
	for _, group := range []string{"", "cluster"} {
		st := scaleState(services, 100, group)
		b.Run("dedicated"+groupSuffix(group), func(b *testing.B) { benchmarkHeld(b, st) })
		st.Self = st.Services[0].Backends[0].Node
		b.Run("node"+groupSuffix(group), func(b *testing.B) { benchmarkHeld(b, st) })
	}
}

// groupSuffix names a sub-benchmark's bucket maps: one per service, or the
// group's.
func groupSuffix(group string) string {
	if group == "" {
		return "/map-per-service"
	}
	return "/group-map"
}

func benchmarkHeld(b *testing.B, st State) {
	services := len(st.Services)
	ctx := context.Background()
	var held uint64
	for b.Loop() {
		before := liveHeap()
		s := NewSyncer(discardNFT{knftables.NewFake(knftables.IPv4Family, TableName)}, nil, nil, nil).BatchBucketElements()
		for range 2 {
			if _, err := s.Sync(ctx, st); err != nil {
				b.Fatal(err)
			}
		}
		after := liveHeap()
		runtime.KeepAlive(s)
		held = after - before
	}
	runtime.KeepAlive(st)
	b.ReportMetric(float64(held)/(1<<20), "held-MB")
	b.ReportMetric(float64(held)/float64(services), "held-B/service")
}

func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkSync5000x100 is one Sync of 5,000 services on 100 nodes with
// the transaction built but not run: a full sync (as at start and every
// --full-sync-interval), and a partial one after a node joined or left
// (alternately); with a bucket map per service and with the group's one.
func BenchmarkSync5000x100(b *testing.B) {
	for _, group := range []string{"", "cluster"} {
		b.Run(groupSuffix(group)[1:], func(b *testing.B) { benchmarkSync(b, group) })
	}
}

// BenchmarkSync5000x100Counters is BenchmarkSync5000x100 with a bucket map
// per group and the traffic counters (CountTraffic): per address, and per
// address and node (500,000 counters of new connections).
func BenchmarkSync5000x100Counters(b *testing.B) {
	for _, c := range []struct {
		name     string
		counting Counting
	}{{"address", Counting{Frontends: true}}, {"node", countAll}} {
		b.Run(c.name, func(b *testing.B) { benchmarkSyncCounting(b, "cluster", c.counting) })
	}
}

func benchmarkSync(b *testing.B, group string) { benchmarkSyncCounting(b, group, Counting{}) }

func benchmarkSyncCounting(b *testing.B, group string, counting Counting) {
	const services = 5000
	ctx := context.Background()
	states := []State{scaleState(services, 100, group), scaleState(services, 101, group)}
	newSyncer := func(b *testing.B) *Syncer {
		s := NewSyncer(discardNFT{knftables.NewFake(knftables.IPv4Family, TableName)}, nil, nil, nil).BatchBucketElements().CountTraffic(counting)
		if _, err := s.Sync(ctx, states[0]); err != nil {
			b.Fatal(err)
		}
		return s
	}
	b.Run("full", func(b *testing.B) {
		s := newSyncer(b)
		for b.Loop() {
			s.ForceFullSync()
			if _, err := s.Sync(ctx, states[0]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("node-change", func(b *testing.B) {
		s := newSyncer(b)
		i := 0
		for b.Loop() {
			i++
			if _, err := s.Sync(ctx, states[i%2]); err != nil {
				b.Fatal(err)
			}
		}
	})
	// One more service and back, alternately: the sync a Service creation
	// asks for.
	more := scaleState(services+1, 100, group)
	b.Run("service-change", func(b *testing.B) {
		s := newSyncer(b)
		i := 0
		for b.Loop() {
			i++
			st := states[0]
			if i%2 == 1 {
				st = more
			}
			if _, err := s.Sync(ctx, st); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDesiredPassthrough5000x100 is the plan (no transaction) of
// 5,000 passthrough services of one bucket group on 100 nodes, as every
// sync computes it.
func BenchmarkDesiredPassthrough5000x100(b *testing.B) {
	st := scaleState(5000, 100, "cluster")
	for i := range st.Services {
		st.Services[i].Forwarding = Passthrough
	}
	st.Interface = "eth0"
	services, _ := normalize(st)
	memo := newAssignMemo()
	for b.Loop() {
		desired(services, memo, Counting{})
	}
}

// BenchmarkKernelAddOneService is the nft run of the transaction that adds
// one service (its chain, rule and elements; a bucket group's) to a table
// that holds n services already, in a network namespace: what one partial
// sync costs in nft at that size, whatever the transaction. nft reads the
// table's chains before it evaluates a rule or a verdict element, so the
// cost grows with the number of chains (one per service port). Needs root
// and nft (skipped otherwise).
func BenchmarkKernelAddOneService(b *testing.B) {
	if _, err := exec.LookPath("nft"); err != nil {
		b.Skip("kernel benchmark: no nft binary")
	}
	l := netlab.NewT(b, netlab.Options{Subnet6: labSubnet6}) // skips without root
	lb := l.AddHostT(b, "lb", netlab.HostOptions{Addr4: labLB, Addr6: labLB6})
	for _, n := range []int{100, 1000, 5000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			all := scaleState(n+1, 100, "cluster")
			before, after := all, all
			before.Services = all.Services[:n]
			if err := lb.Do(func() error {
				nft4, err := NewNFTables(knftables.IPv4Family)
				if err != nil {
					return err
				}
				s := NewSyncer(nft4, nil, nil, nil).BatchBucketElements()
				return errors.Join(addOneService(b, s, nft4, before, after), s.Cleanup(context.Background()))
			}); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// addOneService syncs before, then runs the transaction from before to
// after (timed) and back (not timed) b.N times.
func addOneService(b *testing.B, s *Syncer, nft knftables.Interface, before, after State) error {
	ctx := context.Background()
	if _, err := s.Sync(ctx, before); err != nil {
		return err
	}
	add, remove := nft.NewTransaction(), nft.NewTransaction()
	PartialSync(add, Desired(before).IPv4, Desired(after).IPv4, true)
	PartialSync(remove, Desired(after).IPv4, Desired(before).IPv4, true)
	for b.Loop() {
		if err := nft.Run(ctx, add); err != nil {
			return err
		}
		b.StopTimer()
		if err := nft.Run(ctx, remove); err != nil {
			return err
		}
		b.StartTimer()
	}
	return nil
}

package dataplane

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func nodes(n int) []Backend {
	var bs []Backend
	for i := range n {
		bs = append(bs, Backend{Node: fmt.Sprintf("node-%02d", i), Healthy: true})
	}
	return bs
}

func counts(a Assignment) map[string]int {
	c := map[string]int{}
	for _, n := range a {
		c[n]++
	}
	return c
}

func TestAssignIsDeterministic(t *testing.T) {
	bs := nodes(7)
	bs[3].Healthy = false
	want := Assign("ns/web", bs)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		shuffled := append([]Backend(nil), bs...)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if got := Assign("ns/web", shuffled); got != want {
			t.Fatalf("Assign depends on the order of backends:\n%v\n%v", got, want)
		}
	}
	if other := Assign("ns/other", bs); other == want {
		t.Errorf("services with the same nodes got the same table; the seed is ignored")
	}
}

// A fixed table pins the hash functions: a change would make LB hosts of
// different versions disagree, moving flows on every failover.
func TestAssignIsStableAcrossVersions(t *testing.T) {
	a := Assign("ns/web", nodes(3))
	got := fmt.Sprint(a[:8])
	const want = "[node-00 node-02 node-02 node-02 node-02 node-01 node-01 node-02]"
	if got != want {
		t.Errorf("Assign(ns/web, 3 nodes)[:8] = %s, want %s", got, want)
	}
}

func TestAssignIsBalanced(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 8, 13, 16, 100, 127, 128, 200} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			c := counts(Assign("ns/web", nodes(n)))
			if c[""] != 0 {
				t.Fatalf("%d buckets without backend", c[""])
			}
			share := BucketCount / n
			for node, k := range c {
				if k != share && k != share+1 {
					t.Errorf("%s has %d buckets, want %d or %d", node, k, share, share+1)
				}
			}
			if want := min(n, BucketCount); len(c) != want {
				t.Errorf("%d backends have buckets, want %d", len(c), want)
			}
		})
	}
}

func TestAssignUnhealthyMovesOnlyItsOwnBuckets(t *testing.T) {
	for _, n := range []int{2, 3, 4, 8, 16} {
		for down := range n {
			bs := nodes(n)
			before := Assign("ns/web", bs)
			bs[down].Healthy = false
			after := Assign("ns/web", bs)
			moved := 0
			for i := range before {
				owned := before[i] == bs[down].Node
				switch {
				case owned && after[i] == bs[down].Node:
					t.Fatalf("n=%d: bucket %d stays on unhealthy %s", n, i, bs[down].Node)
				case owned:
					moved++
				case after[i] != before[i]:
					t.Fatalf("n=%d, %s down: bucket %d moved from healthy %s to %s", n, bs[down].Node, i, before[i], after[i])
				}
			}
			if share := BucketCount / n; moved < share || moved > share+1 {
				t.Errorf("n=%d: %d buckets moved, want about %d", n, moved, share)
			}
			bs[down].Healthy = true
			if Assign("ns/web", bs) != before {
				t.Errorf("n=%d: recovery of %s did not restore the table", n, bs[down].Node)
			}
		}
	}
}

func TestAssignSecondFailureMovesOnlyItsOwnBuckets(t *testing.T) {
	bs := nodes(5)
	bs[0].Healthy = false
	before := Assign("ns/web", bs)
	bs[1].Healthy = false
	after := Assign("ns/web", bs)
	for i := range before {
		if before[i] != bs[1].Node && after[i] != before[i] {
			t.Errorf("bucket %d moved from healthy %s to %s", i, before[i], after[i])
		}
	}
	if c := counts(after); c[bs[0].Node]+c[bs[1].Node] != 0 {
		t.Errorf("unhealthy backends keep buckets: %v", c)
	}
}

func TestAssignNoHealthyBackend(t *testing.T) {
	bs := nodes(3)
	for i := range bs {
		bs[i].Healthy = false
	}
	if c := counts(Assign("ns/web", bs)); c[""] != BucketCount {
		t.Errorf("buckets assigned without a healthy backend: %v", c)
	}
	if c := counts(Assign("ns/web", nil)); c[""] != BucketCount {
		t.Errorf("buckets assigned without backends: %v", c)
	}
}

// Removing a backend from the list (not just marking it unhealthy) moves its
// own buckets and, to keep the balance, some others: on average well under
// its own share again for up to 16 backends.
func TestAssignRemovalMovesAboutOneNth(t *testing.T) {
	for _, n := range []int{3, 4, 8, 16} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			share := BucketCount / n
			total, runs := 0, 0
			for s := range 50 {
				seed := fmt.Sprintf("ns/svc-%d", s)
				bs := nodes(n)
				before := Assign(seed, bs)
				for r := range n {
					rest := append(append([]Backend(nil), bs[:r]...), bs[r+1:]...)
					after := Assign(seed, rest)
					moved := 0
					for i := range before {
						if before[i] != after[i] {
							moved++
						}
					}
					if moved > 2*share+16 {
						t.Errorf("%s: removing %s of %d moved %d buckets", seed, bs[r].Node, n, moved)
					}
					total += moved
					runs++
				}
			}
			avg := float64(total) / float64(runs)
			t.Logf("n=%d: removing one backend moves %.1f buckets on average (its own share: %d)", n, avg, share)
			if avg > 2.1*float64(share) {
				t.Errorf("average moved %.1f, want at most %.1f", avg, 2.1*float64(share))
			}
		})
	}
}

func BenchmarkAssign16(b *testing.B) {
	bs := nodes(16)
	for b.Loop() {
		Assign("ns/web", bs)
	}
}

func TestForNewFlows(t *testing.T) {
	healthy := func(bs []Backend) map[string]bool {
		m := map[string]bool{}
		for _, b := range bs {
			m[b.Node] = b.Healthy
		}
		return m
	}
	for _, tc := range []struct {
		name     string
		self     string
		backends []Backend
		want     map[string]bool
		selfOnly bool
		lbNodes  []string
	}{
		{"dedicated host", "", nodes(3), map[string]bool{"node-00": true, "node-01": true, "node-02": true}, false, nil},
		{"host not a backend", "lb-1", nodes(2), map[string]bool{"node-00": true, "node-01": true}, false, nil},
		{"host and others", "node-01", nodes(3), map[string]bool{"node-00": true, "node-01": false, "node-02": true}, false, nil},
		{"host the only backend", "node-00", nodes(1), map[string]bool{"node-00": true}, true, nil},
		{"others all unhealthy", "node-00", []Backend{{Node: "node-00", Healthy: true}, {Node: "node-01"}}, map[string]bool{"node-00": true, "node-01": false}, true, nil},
		{"host unhealthy", "node-00", []Backend{{Node: "node-00"}, {Node: "node-01", Healthy: true}}, map[string]bool{"node-00": false, "node-01": true}, false, nil},
		// Load-balancer hosts that are Nodes: all left out, from any host.
		{"host among load-balancer nodes", "node-00", nodes(4), map[string]bool{"node-00": false, "node-01": false, "node-02": true, "node-03": true}, false, []string{"node-00", "node-01"}},
		{"another load-balancer node's table", "node-01", nodes(4), map[string]bool{"node-00": false, "node-01": false, "node-02": true, "node-03": true}, false, []string{"node-00", "node-01"}},
		{"dedicated host beside load-balancer nodes", "", nodes(4), map[string]bool{"node-00": false, "node-01": false, "node-02": true, "node-03": true}, false, []string{"node-00", "node-01"}},
		{"only load-balancer nodes healthy: self alone left out", "node-00", []Backend{{Node: "node-00", Healthy: true}, {Node: "node-01", Healthy: true}, {Node: "node-02"}}, map[string]bool{"node-00": false, "node-01": true, "node-02": false}, false, []string{"node-00", "node-01"}},
		{"only self healthy among load-balancer nodes", "node-00", []Backend{{Node: "node-00", Healthy: true}, {Node: "node-01"}}, map[string]bool{"node-00": true, "node-01": false}, true, []string{"node-00", "node-01"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.backends)
			got, selfOnly := ForNewFlows(in, tc.self, tc.lbNodes)
			if diff := cmp.Diff(tc.want, healthy(got)); diff != "" {
				t.Errorf("health for new flows (-want +got):\n%s", diff)
			}
			if selfOnly != tc.selfOnly {
				t.Errorf("selfOnly = %t, want %t", selfOnly, tc.selfOnly)
			}
			if !cmp.Equal(in, tc.backends, cmpopts.EquateComparable(netip.Addr{})) {
				t.Errorf("ForNewFlows changed its input: %v", in)
			}
		})
	}
}

// TestSameTableOnEveryHost: with the load-balancer hosts' Nodes known,
// every host (each of them, and a dedicated one) fills a proxy service's
// buckets the same way, so a flow keeps its node when its address moves
// between them; leaving out only itself, each host's table differs.
func TestSameTableOnEveryHost(t *testing.T) {
	bs := nodes(5)
	lbNodes := []string{"node-00", "node-01"}
	table := func(self string, lb []string) Assignment {
		out, _ := ForNewFlows(bs, self, lb)
		return Assign("ns/web", out)
	}
	want := table("", lbNodes)
	for _, self := range []string{"node-00", "node-01"} {
		if got := table(self, lbNodes); got != want {
			t.Errorf("host %s: table differs from a dedicated host's", self)
		}
	}
	for b, node := range want {
		if slices.Contains(lbNodes, node) {
			t.Errorf("bucket %d goes to load-balancer node %s while others are healthy", b, node)
		}
	}
	if table("node-00", nil) == table("node-01", nil) {
		t.Error("without the load-balancer nodes the two hosts' tables are the same: the test shows nothing")
	}
}

// TestAssignWithoutSelf: the host's own node gets none of the buckets, and
// the others keep theirs; its buckets go where every host sends them once
// that node fails.
func TestAssignWithoutSelf(t *testing.T) {
	bs := nodes(4)
	all := Assign("ns/web", bs)
	mine, _ := ForNewFlows(bs, "node-02", nil)
	got := Assign("ns/web", mine)
	failed := slices.Clone(bs)
	failed[2].Healthy = false
	if want := Assign("ns/web", failed); got != want {
		t.Errorf("without self:\n%v\nwant the table with node-02 unhealthy:\n%v", got, want)
	}
	for i := range got {
		if got[i] == "node-02" {
			t.Fatalf("bucket %d goes to the host's own node", i)
		}
		if all[i] != "node-02" && got[i] != all[i] {
			t.Errorf("bucket %d moved from %s to %s", i, all[i], got[i])
		}
	}
}

package dataplane

import (
	"hash/fnv"
	"slices"
	"sync"
)

// BucketCount is the number of buckets a service's flows are hashed into.
//
// 128 keeps every backend within one bucket (1/128 ≈ 0.8% of the flows) of
// its fair share, which for the common 2–16 nodes behind a service is a
// spread of at most ±6%, while one service port costs only 128 map entries
// per family in the ruleset and the transaction. The kernel lookup is a hash
// map, so the count does not change the per-packet cost. It must never change
// across versions: every LB host must hash a flow into the same bucket.
const BucketCount = 128

// Assignment maps each bucket to the name of the backend that serves it, or
// to "" when no backend is healthy.
type Assignment [BucketCount]string

// Assign fills the buckets of one service from its backends (the ones of one
// address family). seed is the service's name, so that services with the same
// nodes do not all send bucket 0 to the same node.
//
// It is deterministic (every LB host computes the same table from the same
// input, whatever the order of backends) and consistent in two steps:
//
//   - the primary owner of each bucket comes from a balanced rendezvous
//     assignment over all listed backends, healthy or not: every backend gets
//     ⌊128/n⌋ or ⌈128/n⌉ buckets, and adding or removing a listed backend
//     moves its own buckets plus, on average, about half as many others;
//   - a bucket whose primary owner is unhealthy goes to its highest-ranked
//     healthy backend by plain rendezvous hashing. So a backend turning
//     unhealthy moves exactly its own buckets, spread over the others, and
//     turning healthy again takes exactly those buckets back.
//
// Health changes, the frequent case, therefore never move a flow between two
// healthy backends.
//
// (A Maglev table was the first candidate; with only 128 slots it moves on
// average as many other buckets as the removed backend owned, and up to 39,
// against 6 and 12 here for 8 backends.)
func Assign(seed string, backends []Backend) Assignment {
	var a Assignment
	names, owners := assignOwners(seed, backends)
	for bucket, owner := range owners {
		if owner >= 0 {
			a[bucket] = names[owner]
		}
	}
	return a
}

// assignOwners is Assign with each bucket's backend given as its index in
// names (the sorted, distinct names of backends), or -1 for none.
func assignOwners(seed string, backends []Backend) (names []string, owners [BucketCount]int) {
	for i := range owners {
		owners[i] = -1
	}
	if len(backends) == 0 {
		return nil, owners
	}
	names = sortedNames(backends)
	hashes := make([]uint64, len(names))
	for i, n := range names {
		hashes[i] = hash64(seed, n)
	}
	healthy := make([]bool, len(names))
	for _, b := range backends {
		if i, _ := slices.BinarySearch(names, b.Node); b.Healthy {
			healthy[i] = true
		}
	}
	for bucket, owner := range balanced(hashes) {
		if healthy[owner] {
			owners[bucket] = owner
		} else if i := rendezvous(hashes, bucket, healthy); i >= 0 {
			owners[bucket] = i
		}
	}
	return names, owners
}

func sortedNames(backends []Backend) []string {
	var names []string
	for _, b := range backends {
		names = append(names, b.Node)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// maxBackends bounds the backends per service that get buckets (by name
// order); with more than BucketCount some get none anyway.
const maxBackends = 1 << 16

// balanced is rendezvous hashing with bounded loads. It returns the index of
// the backend (of hashes) that owns each bucket: all (bucket, backend) pairs
// are taken by descending score, and a pair is kept when its bucket is still
// free and its backend below its share (⌊128/n⌋, or one more for the first
// 128 mod n backends that reach it).
//
// The order of the pairs is that of one sortable word per pair: 41 bits of
// inverted score (so that ascending words are descending scores), 7 of
// bucket, 16 of backend. Rather than sorting all 128 × n words, it
// distributes them into bins by their top bits (the scores are uniform, so
// the bins are small and even), then sorts and walks one bin at a time
// until every bucket is taken: the same order, so the same table, at a
// fraction of the cost (TestBalancedMatchesFullSort, BenchmarkBalanced100).
func balanced(hashes []uint64) [BucketCount]int {
	n := min(len(hashes), maxBackends)
	total := BucketCount * n
	bits := binBits(total)
	buf := balancedBufs.Get().(*balancedBuf)
	defer balancedBufs.Put(buf)
	buf.words = slices.Grow(buf.words[:0], 2*total)[:2*total]
	pairs, binned := buf.words[:total], buf.words[total:]
	buf.starts = slices.Grow(buf.starts[:0], 1<<bits+1)[:1<<bits+1]
	starts := buf.starts
	clear(starts)
	for i, h := range hashes[:n] {
		for b := range BucketCount {
			w := ^score(h, b)>>23<<23 | uint64(b)<<16 | uint64(i)
			pairs[i*BucketCount+b] = w
			starts[w>>(64-bits)+1]++
		}
	}
	for k := 1; k < len(starts); k++ {
		starts[k] += starts[k-1]
	}
	buf.next = append(buf.next[:0], starts[:len(starts)-1]...)
	next := buf.next
	for _, w := range pairs {
		bin := w >> (64 - bits)
		binned[next[bin]] = w
		next[bin]++
	}

	var table [BucketCount]int
	free := [BucketCount]bool{}
	for b := range free {
		free[b] = true
	}
	buf.counts = slices.Grow(buf.counts[:0], n)[:n]
	counts := buf.counts
	clear(counts)
	share, extra := BucketCount/n, BucketCount%n
	assigned := 0
	for bin := 0; assigned < BucketCount; bin++ {
		// Pairs of a taken bucket or a full backend stay unusable (both
		// only fill up): drop them before sorting what is left of the bin.
		run := binned[starts[bin]:starts[bin+1]]
		live := run[:0]
		for _, w := range run {
			node := int(w & (maxBackends - 1))
			if free[w>>16&(BucketCount-1)] && (counts[node] < share || counts[node] == share && extra > 0) {
				live = append(live, w)
			}
		}
		slices.Sort(live)
		for _, w := range live {
			bucket, node := int(w>>16&(BucketCount-1)), int(w&(maxBackends-1))
			if !free[bucket] {
				continue
			}
			switch c := counts[node]; {
			case c > share, c == share && extra == 0:
				continue
			case c == share:
				extra--
			}
			table[bucket], free[bucket] = node, false
			counts[node]++
			if assigned++; assigned == BucketCount {
				break
			}
		}
	}
	return table
}

// balancedBuf is balanced's scratch space, reused across calls: a sync
// after a node change calls it for every service, and allocating 240 KB
// each time (100 backends) made the collector the larger cost.
type balancedBuf struct {
	words        []uint64
	starts, next []int32
	counts       []int
}

var balancedBufs = sync.Pool{New: func() any { return &balancedBuf{} }}

// binBits is how many top bits of a pair's word pick its bin: about four
// pairs per bin, at least 1 bit and at most 20.
func binBits(pairs int) uint {
	bits := uint(1)
	for bits < 20 && 1<<(bits+2) < pairs {
		bits++
	}
	return bits
}

// rendezvous returns the healthy backend with the highest score for bucket,
// or -1 when none is healthy.
func rendezvous(hashes []uint64, bucket int, healthy []bool) int {
	best, bestScore := -1, uint64(0)
	for i, h := range hashes {
		if !healthy[i] {
			continue
		}
		if s := score(h, bucket); best < 0 || s > bestScore {
			best, bestScore = i, s
		}
	}
	return best
}

// score is the rendezvous weight of a backend (its hash h) for a bucket.
func score(h uint64, bucket int) uint64 {
	return mix64(h + uint64(bucket)*0x9e3779b97f4a7c15)
}

// hash64 is FNV-1a over the NUL-separated parts, mixed. Like mix64 it is
// fixed forever: LB hosts running different versions must still agree.
func hash64(parts ...string) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return mix64(h.Sum64())
}

// withoutLBNodes marks the healthy backends that are lbNodes or self
// unhealthy, when some other backend is healthy (ok); otherwise it
// returns backends unchanged and false. It copies before it changes.
func withoutLBNodes(backends []Backend, self string, lbNodes []string) (_ []Backend, ok bool) {
	if len(lbNodes) == 0 {
		return backends, false
	}
	lb := func(b Backend) bool { return b.Node == self || slices.Contains(lbNodes, b.Node) }
	outside, inside := false, false
	for _, b := range backends {
		if b.Healthy {
			outside = outside || !lb(b)
			inside = inside || lb(b)
		}
	}
	if !outside {
		return backends, false
	}
	if !inside {
		return backends, true
	}
	out := slices.Clone(backends)
	for i := range out {
		if out[i].Healthy && lb(out[i]) {
			out[i].Healthy = false
		}
	}
	return out, true
}

// mix64 is the SplitMix64 finalizer.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// ForNewFlows returns the backends as the buckets see them on the
// load-balancer host that is Node self: self gets no new flows while
// another backend is healthy, because a connection the host DNATs to its
// own NodePort skips kube-proxy's NodePort rule (netfilter maps a
// connection's destination once per hook) and fails. selfOnly reports that
// self is the only healthy backend: then it keeps its flows, and they fail
// the same way (say so to the user; passthrough forwarding has no such
// limit). backends is returned unchanged, not copied, when self is not a
// healthy backend.
//
// lbNodes are the Nodes that are load-balancer hosts (self among them).
// While a backend outside lbNodes is healthy, none of lbNodes gets new
// flows, whichever host computes the table: every load-balancer host then
// fills the buckets the same way, a bucket of a load-balancer host's node
// going where Assign sends it when that node is unhealthy, and a flow
// keeps its node when its address moves to another host (a takeover, a
// rolling update's handover). Leaving out self alone would make each
// host's table differ from the others' in two nodes' buckets: a move
// would send those flows (2/n of them) to another node, which resets
// them. Otherwise (every healthy backend is a load-balancer host's node)
// only self is left out, as when lbNodes is empty, and the tables differ.
func ForNewFlows(backends []Backend, self string, lbNodes []string) (_ []Backend, selfOnly bool) {
	if out, ok := withoutLBNodes(backends, self, lbNodes); ok {
		return out, false
	}
	if self == "" {
		return backends, false
	}
	mine, others := -1, false
	for i, b := range backends {
		switch {
		case b.Node == self && b.Healthy:
			mine = i
		case b.Healthy:
			others = true
		}
	}
	if mine < 0 {
		return backends, false
	}
	if !others {
		return backends, true
	}
	out := slices.Clone(backends)
	out[mine].Healthy = false
	return out, false
}

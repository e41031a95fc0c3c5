package dataplane

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// fullSortBalanced is balanced as first written, sorting every pair: the
// reference the binned walk must match. It returns the index of
// the backend (of hashes) that owns each bucket: all (bucket, backend) pairs
// are taken by descending score, and a pair is kept when its bucket is still
// free and its backend below its share (⌊128/n⌋, or one more for the first
// 128 mod n backends that reach it).
func fullSortBalanced(hashes []uint64) [BucketCount]int {
	n := min(len(hashes), maxBackends)
	// A pair is one sortable word: 41 bits of inverted score (so that an
	// ascending sort gives descending scores), 7 of bucket, 16 of backend.
	pairs := make([]uint64, 0, BucketCount*n)
	for i, h := range hashes[:n] {
		for b := range BucketCount {
			pairs = append(pairs, ^score(h, b)>>23<<23|uint64(b)<<16|uint64(i))
		}
	}
	slices.Sort(pairs)

	var table [BucketCount]int
	free := [BucketCount]bool{}
	for b := range free {
		free[b] = true
	}
	counts := make([]int, n)
	share, extra := BucketCount/n, BucketCount%n
	for assigned, i := 0, 0; assigned < BucketCount; i++ {
		bucket, node := int(pairs[i]>>16&(BucketCount-1)), int(pairs[i]&(maxBackends-1))
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
		assigned++
	}
	return table
}

// balanced walks the pairs bin by bin; the table must be the one a full
// sort gives, for any number of backends and any hashes (the assignment
// must never change across versions: every LB host computes the same).
func TestBalancedMatchesFullSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 3, 7, 16, 64, 100, 127, 128, 129, 300, 1000} {
		for trial := range 20 {
			hashes := make([]uint64, n)
			for i := range hashes {
				hashes[i] = rng.Uint64()
			}
			if trial == 0 {
				// Equal hashes: ties broken by bucket and backend.
				for i := range hashes {
					hashes[i] = hashes[0]
				}
			}
			if got, want := balanced(hashes), fullSortBalanced(hashes); got != want {
				t.Fatalf("n=%d trial %d: binned walk gives %v, full sort %v", n, trial, got, want)
			}
		}
	}
}

// BenchmarkBalanced100 compares the binned walk with the full sort for 100
// backends, side by side.
func BenchmarkBalanced100(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	hashes := make([]uint64, 100)
	for i := range hashes {
		hashes[i] = rng.Uint64()
	}
	b.Run("binned", func(b *testing.B) {
		for b.Loop() {
			balanced(hashes)
		}
	})
	b.Run("full-sort", func(b *testing.B) {
		for b.Loop() {
			fullSortBalanced(hashes)
		}
	})
}

package ipam

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

// TestAddrSet compares addrSet with a brute-force search on random sets,
// at the bottom and the very top of both address spaces.
func TestAddrSet(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	starts := []netip.Addr{
		netip.MustParseAddr("0.0.0.0"),
		netip.MustParseAddr("10.0.0.250"),
		netip.MustParseAddr("255.255.255.224"),
		netip.MustParseAddr("::"),
		netip.MustParseAddr("2001:db8::ffff:ffff:ffff:fff0"), // crosses 64 bits
		netip.MustParseAddr("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffe0"),
	}
	for round := range 2000 {
		start := starts[round%len(starts)]
		f := familyOf(start)
		all := make([]netip.Addr, 32)
		for i, a := 0, start; i < len(all); i, a = i+1, a.Next() {
			all[i] = a
		}
		r := span{first: toU128(all[rng.IntN(8)]), last: toU128(all[24+rng.IntN(8)])}
		var s addrSet
		held := map[netip.Addr]bool{}
		density := rng.Float64()
		for _, a := range all {
			if rng.Float64() < density {
				s.insert(toU128(a))
				s.insert(toU128(a)) // twice: a set
				held[a] = true
			}
		}
		if rng.IntN(2) == 0 { // and remove some again
			for _, a := range all {
				if held[a] && rng.IntN(4) == 0 {
					s.remove(toU128(a))
					s.remove(toU128(a))
					delete(held, a)
				}
			}
		}
		var wantFree netip.Addr
		wantCount := 0
		for _, a := range all {
			if !r.contains(toU128(a)) {
				continue
			}
			if held[a] {
				wantCount++
			} else if !wantFree.IsValid() {
				wantFree = a
			}
		}
		u, ok := s.firstFree(r)
		var gotFree netip.Addr
		if ok {
			gotFree = u.addr(f)
		}
		if gotFree != wantFree {
			t.Fatalf("round %d: firstFree(%s-%s) = %v, want %v (held %v)", round, r.first.addr(f), r.last.addr(f), gotFree, wantFree, held)
		}
		if got := s.countIn(r); got != wantCount {
			t.Fatalf("round %d: countIn = %d, want %d", round, got, wantCount)
		}
	}
}

func TestSpanSize(t *testing.T) {
	tests := []struct {
		first, last string
		want        uint64
	}{
		{"10.0.0.0", "10.0.0.0", 1},
		{"0.0.0.0", "255.255.255.255", 1 << 32},
		{"2001:db8::", "2001:db8::ffff:ffff:ffff:fffe", 1<<64 - 1},
		{"2001:db8::", "2001:db8::ffff:ffff:ffff:ffff", 1<<64 - 1}, // 2^64 saturates
		{"::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 1<<64 - 1},
	}
	for _, tt := range tests {
		s := span{first: toU128(netip.MustParseAddr(tt.first)), last: toU128(netip.MustParseAddr(tt.last))}
		if got := s.size(); got != tt.want {
			t.Errorf("size(%s-%s) = %d, want %d", tt.first, tt.last, got, tt.want)
		}
	}
}

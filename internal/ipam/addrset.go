package ipam

import (
	"cmp"
	"encoding/binary"
	"math"
	"math/bits"
	"net/netip"
	"slices"
	"sort"

	v1 "k8s.io/api/core/v1"
)

// family indexes per-family state: fam4 for IPv4, fam6 for IPv6.
type family int

const (
	fam4 family = iota
	fam6
)

func familyOf(a netip.Addr) family {
	if a.Is4() {
		return fam4
	}
	return fam6
}

func familyIndex(f v1.IPFamily) family {
	if f == v1.IPv6Protocol {
		return fam6
	}
	return fam4
}

func (f family) ipFamily() v1.IPFamily {
	if f == fam6 {
		return v1.IPv6Protocol
	}
	return v1.IPv4Protocol
}

// u128 is an address as an unsigned integer; an IPv4 address is in the low
// 32 bits. Arithmetic on it is what lets a range be searched without
// iterating it.
type u128 struct{ hi, lo uint64 }

func toU128(a netip.Addr) u128 {
	if a.Is4() {
		b := a.As4()
		return u128{lo: uint64(binary.BigEndian.Uint32(b[:]))}
	}
	b := a.As16()
	return u128{hi: binary.BigEndian.Uint64(b[:8]), lo: binary.BigEndian.Uint64(b[8:])}
}

func (u u128) addr(f family) netip.Addr {
	if f == fam4 {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(u.lo))
		return netip.AddrFrom4(b)
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], u.hi)
	binary.BigEndian.PutUint64(b[8:], u.lo)
	return netip.AddrFrom16(b)
}

func (u u128) cmp(v u128) int {
	return cmp.Or(cmp.Compare(u.hi, v.hi), cmp.Compare(u.lo, v.lo))
}

func (u u128) add(n uint64) u128 {
	lo, carry := bits.Add64(u.lo, n, 0)
	return u128{hi: u.hi + carry, lo: lo}
}

// span is an inclusive range of addresses of one family.
type span struct{ first, last u128 }

func (s span) contains(u u128) bool { return s.first.cmp(u) <= 0 && u.cmp(s.last) <= 0 }

// size is the number of addresses in s, saturating at math.MaxUint64.
func (s span) size() uint64 {
	lo, borrow := bits.Sub64(s.last.lo, s.first.lo, 0)
	hi, _ := bits.Sub64(s.last.hi, s.first.hi, borrow)
	lo, carry := bits.Add64(lo, 1, 0)
	if hi != 0 || carry != 0 {
		return math.MaxUint64
	}
	return lo
}

func addSaturating(a, b uint64) uint64 {
	s, carry := bits.Add64(a, b, 0)
	if carry != 0 {
		return math.MaxUint64
	}
	return s
}

// addrSet is a sorted set of the addresses of one family that are held.
// Finding the lowest free address of a range takes two binary searches, so
// a range is never iterated: an IPv6 /64 costs what a /28 does.
type addrSet []u128

// lowerBound is the index of the first element not below u.
func (s addrSet) lowerBound(u u128) int {
	return sort.Search(len(s), func(i int) bool { return s[i].cmp(u) >= 0 })
}

// upperBound is the index of the first element above u.
func (s addrSet) upperBound(u u128) int {
	return sort.Search(len(s), func(i int) bool { return s[i].cmp(u) > 0 })
}

func (s *addrSet) insert(u u128) {
	i := s.lowerBound(u)
	if i < len(*s) && (*s)[i] == u {
		return
	}
	*s = slices.Insert(*s, i, u)
}

func (s *addrSet) remove(u u128) {
	i := s.lowerBound(u)
	if i < len(*s) && (*s)[i] == u {
		*s = slices.Delete(*s, i, i+1)
	}
}

// countIn is the number of elements in r.
func (s addrSet) countIn(r span) int {
	return s.upperBound(r.last) - s.lowerBound(r.first)
}

// firstFree is the lowest address of r not in s.
func (s addrSet) firstFree(r span) (u128, bool) {
	used := s[s.lowerBound(r.first):s.upperBound(r.last)]
	// The elements are distinct and sorted, so used[i] >= first+i, with
	// equality exactly up to the first gap.
	k := sort.Search(len(used), func(i int) bool { return used[i] != r.first.add(uint64(i)) })
	if k < len(used) {
		return r.first.add(uint64(k)), true
	}
	if k > 0 && used[k-1] == r.last {
		return u128{}, false // used is first..last without a gap
	}
	return r.first.add(uint64(k)), true
}

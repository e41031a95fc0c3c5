package membership

import (
	"hash/fnv"
	"net/netip"
	"strings"
)

// Owners returns the owner of each virtual IP among members, by rendezvous
// (highest random weight) hashing: each member scores each address, the
// highest score owns it. It is pure and the same on every host given the
// same members, in any order. Removing a member moves only the addresses it
// owned; adding one moves to it only the addresses it now wins. With no
// members it returns an empty map.
func Owners(vips []netip.Addr, members []string) map[netip.Addr]string {
	out := make(map[netip.Addr]string, len(vips))
	if len(members) == 0 {
		return out
	}
	for _, v := range vips {
		out[v.Unmap()] = Owner(v, members)
	}
	return out
}

// Owner is the member that owns vip among members ("" when there are none).
// Between two members a and b, the one Owner(vip, {a, b}) returns is also
// the one that wins against the other in any larger set: the owner of a set
// wins against every other member of it.
func Owner(vip netip.Addr, members []string) string {
	vip = vip.Unmap()
	best, bestScore := "", uint64(0)
	for _, m := range members {
		s := score(vip, m)
		if best == "" || s > bestScore || s == bestScore && strings.Compare(m, best) < 0 {
			best, bestScore = m, s
		}
	}
	return best
}

// score is a 64-bit hash of (vip, member) with good avalanche: FNV-1a
// followed by the splitmix64 finaliser.
func score(vip netip.Addr, member string) uint64 {
	h := fnv.New64a()
	b := vip.As16()
	_, _ = h.Write(b[:])
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(member))
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

package config

import (
	"fmt"
	"math"
	"math/bits"
	"net/netip"
	"strings"
)

// AddrRange is an inclusive range of addresses of one family.
type AddrRange struct {
	First, Last netip.Addr
}

// ParseAddrRange parses a CIDR with no host bits set ("192.0.2.0/28",
// "2001:db8::/120") or an inclusive range "first-last" ("192.0.2.10-192.0.2.20").
// IPv4-mapped IPv6 addresses and zones are refused.
func ParseAddrRange(s string) (AddrRange, error) {
	if strings.Contains(s, "/") {
		return parseCIDR(s)
	}
	first, last, isRange := strings.Cut(s, "-")
	var r AddrRange
	var errFirst, errLast error
	r.First, errFirst = parseRangeEnd(first)
	r.Last, errLast = parseRangeEnd(last)
	switch {
	case s == "":
		return AddrRange{}, errEmpty
	case !isRange && errFirst == nil:
		return AddrRange{}, fmt.Errorf("%q is a single address; write it as a CIDR (%s/%d) or a range", s, s, r.First.BitLen())
	case !isRange || errFirst != nil && errLast != nil:
		return AddrRange{}, fmt.Errorf("%q is neither a CIDR (192.0.2.0/28) nor a range (192.0.2.10-192.0.2.20)", s)
	case errFirst != nil:
		return AddrRange{}, fmt.Errorf("range %q: %w", s, errFirst)
	case errLast != nil:
		return AddrRange{}, fmt.Errorf("range %q: %w", s, errLast)
	}
	if r.First.Is4() != r.Last.Is4() {
		return AddrRange{}, fmt.Errorf("range %q mixes IPv4 and IPv6", s)
	}
	if r.Last.Less(r.First) {
		return AddrRange{}, fmt.Errorf("range %q ends before it starts", s)
	}
	return r, nil
}

func parseCIDR(s string) (AddrRange, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return AddrRange{}, fmt.Errorf("%q is not a valid CIDR", s)
	}
	if err := checkPlainAddr(p.Addr()); err != nil {
		return AddrRange{}, err
	}
	if m := p.Masked(); m != p {
		return AddrRange{}, fmt.Errorf("CIDR %q has host bits set; did you mean %s?", s, m)
	}
	return AddrRange{First: p.Addr(), Last: lastAddr(p)}, nil
}

func parseRangeEnd(s string) (netip.Addr, error) {
	s = strings.TrimSpace(s)
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%q is not an IPv4 or IPv6 address", s)
	}
	return a, checkPlainAddr(a)
}

// checkPlainAddr refuses addresses that would compare surprisingly: with a
// zone, or IPv4 written as IPv6.
func checkPlainAddr(a netip.Addr) error {
	switch {
	case a.Zone() != "":
		return fmt.Errorf("%s: an address must not have a zone", a)
	case a.Is4In6():
		return fmt.Errorf("%s: write IPv4 addresses in IPv4 form (%s)", a, a.Unmap())
	}
	return nil
}

// lastAddr is the last address of p, which must be masked.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().As16()
	offset := 0
	if p.Addr().Is4() {
		offset = 96
	}
	for i := offset + p.Bits(); i < 128; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a := netip.AddrFrom16(b)
	if p.Addr().Is4() {
		return a.Unmap()
	}
	return a
}

// Contains reports whether a lies in r. An address of the other family, or
// an IPv4-mapped IPv6 address in an IPv4 range, is not contained.
func (r AddrRange) Contains(a netip.Addr) bool {
	a = a.WithZone("")
	return a.IsValid() && a.BitLen() == r.First.BitLen() && r.First.Compare(a) <= 0 && a.Compare(r.Last) <= 0
}

// Is6 reports whether r is an IPv6 range.
func (r AddrRange) Is6() bool { return r.First.Is6() }

// Size is the number of addresses in r, saturating at math.MaxUint64.
func (r AddrRange) Size() uint64 {
	fh, fl := halves(r.First)
	lh, ll := halves(r.Last)
	lo, borrow := bits.Sub64(ll, fl, 0)
	hi, _ := bits.Sub64(lh, fh, borrow)
	lo, carry := bits.Add64(lo, 1, 0)
	if hi != 0 || carry != 0 {
		return math.MaxUint64
	}
	return lo
}

func halves(a netip.Addr) (hi, lo uint64) {
	b := a.As16()
	for i := range 8 {
		hi = hi<<8 | uint64(b[i])
		lo = lo<<8 | uint64(b[i+8])
	}
	return hi, lo
}

// String is r as a CIDR if it is exactly one, otherwise "first-last".
func (r AddrRange) String() string {
	if p, ok := r.prefix(); ok {
		return p.String()
	}
	return r.First.String() + "-" + r.Last.String()
}

func (r AddrRange) prefix() (netip.Prefix, bool) {
	if !r.First.IsValid() {
		return netip.Prefix{}, false
	}
	for bits := range r.First.BitLen() + 1 {
		p := netip.PrefixFrom(r.First, bits)
		if p.Masked().Addr() == r.First && lastAddr(p) == r.Last {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

// overlaps reports whether r and o share an address.
func (r AddrRange) overlaps(o AddrRange) bool {
	return r.First.BitLen() == o.First.BitLen() && r.First.Compare(o.Last) <= 0 && o.First.Compare(r.Last) <= 0
}

package config

import (
	"math"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseAddrRange(t *testing.T) {
	tests := []struct {
		name       string
		in         string
		want       AddrRange
		wantString string
		wantSize   uint64
	}{
		{name: "IPv4 CIDR", in: "192.0.2.0/28", want: mustRange("192.0.2.0", "192.0.2.15"), wantString: "192.0.2.0/28", wantSize: 16},
		{name: "IPv4 host", in: "192.0.2.7/32", want: mustRange("192.0.2.7", "192.0.2.7"), wantString: "192.0.2.7/32", wantSize: 1},
		{name: "all of IPv4", in: "0.0.0.0/0", want: mustRange("0.0.0.0", "255.255.255.255"), wantString: "0.0.0.0/0", wantSize: 1 << 32},
		{name: "IPv4 range", in: "192.0.2.10-192.0.2.20", want: mustRange("192.0.2.10", "192.0.2.20"), wantString: "192.0.2.10-192.0.2.20", wantSize: 11},
		{name: "range that is a CIDR prints as one", in: "192.0.2.16 - 192.0.2.31", want: mustRange("192.0.2.16", "192.0.2.31"), wantString: "192.0.2.16/28", wantSize: 16},
		{name: "IPv6 CIDR", in: "2001:db8::/120", want: mustRange("2001:db8::", "2001:db8::ff"), wantString: "2001:db8::/120", wantSize: 256},
		{name: "IPv6 /64 is 2^64 addresses, saturated", in: "2001:db8::/64", want: mustRange("2001:db8::", "2001:db8::ffff:ffff:ffff:ffff"), wantString: "2001:db8::/64", wantSize: math.MaxUint64},
		{name: "IPv6 /65", in: "2001:db8::/65", want: mustRange("2001:db8::", "2001:db8::7fff:ffff:ffff:ffff"), wantString: "2001:db8::/65", wantSize: 1 << 63},
		{name: "all of IPv6", in: "::/0", want: mustRange("::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"), wantString: "::/0", wantSize: math.MaxUint64},
		{name: "IPv6 range across a 64-bit boundary", in: "2001:db8::ffff:ffff:ffff:fffe-2001:db8:0:1::1", want: mustRange("2001:db8::ffff:ffff:ffff:fffe", "2001:db8:0:1::1"), wantString: "2001:db8::ffff:ffff:ffff:fffe-2001:db8:0:1::1", wantSize: 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseAddrRange(tc.in)
			if err != nil {
				t.Fatalf("ParseAddrRange(%q): %v", tc.in, err)
			}
			if diff := cmp.Diff(tc.want, got, cmpConfig); diff != "" {
				t.Errorf("ParseAddrRange(%q) (-want +got):\n%s", tc.in, diff)
			}
			if s := got.String(); s != tc.wantString {
				t.Errorf("String() = %q, want %q", s, tc.wantString)
			}
			if n := got.Size(); n != tc.wantSize {
				t.Errorf("Size() = %d, want %d", n, tc.wantSize)
			}
			if got.Is6() != tc.want.First.Is6() {
				t.Errorf("Is6() = %v", got.Is6())
			}
		})
	}
}

func TestAddrRangeContains(t *testing.T) {
	r4 := mustRange("192.0.2.10", "192.0.2.20")
	r6 := mustRange("2001:db8::10", "2001:db8::20")
	tests := []struct {
		name string
		r    AddrRange
		addr netip.Addr
		want bool
	}{
		{name: "first", r: r4, addr: netip.MustParseAddr("192.0.2.10"), want: true},
		{name: "last", r: r4, addr: netip.MustParseAddr("192.0.2.20"), want: true},
		{name: "below", r: r4, addr: netip.MustParseAddr("192.0.2.9")},
		{name: "above", r: r4, addr: netip.MustParseAddr("192.0.2.21")},
		{name: "IPv4-mapped is another family", r: r4, addr: netip.MustParseAddr("::ffff:192.0.2.15")},
		{name: "IPv6 in IPv6", r: r6, addr: netip.MustParseAddr("2001:db8::1a"), want: true},
		{name: "zone is ignored", r: r6, addr: netip.MustParseAddr("2001:db8::1a%eth0"), want: true},
		{name: "IPv4 in IPv6", r: r6, addr: netip.MustParseAddr("0.0.0.16")},
		{name: "invalid address", r: r4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.r.Contains(tc.addr); got != tc.want {
				t.Errorf("%v.Contains(%v) = %v, want %v", tc.r, tc.addr, got, tc.want)
			}
		})
	}
}

func mustRange(first, last string) AddrRange {
	return AddrRange{netip.MustParseAddr(first), netip.MustParseAddr(last)}
}

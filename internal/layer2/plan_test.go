package layer2

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func addrs(ss ...string) []netip.Addr {
	var res []netip.Addr
	for _, s := range ss {
		res = append(res, netip.MustParseAddr(s))
	}
	return res
}

func prefixes(ss ...string) []netip.Prefix {
	var res []netip.Prefix
	for _, s := range ss {
		res = append(res, netip.MustParsePrefix(s))
	}
	return res
}

// observed builds kernel addresses; a trailing "*" marks one as ours.
func observed(ss ...string) []kernelAddr {
	var res []kernelAddr
	for _, s := range ss {
		var proto uint8
		if s[len(s)-1] == '*' {
			s, proto = s[:len(s)-1], AddrProtocol
		}
		res = append(res, kernelAddr{Prefix: netip.MustParsePrefix(s), Proto: proto})
	}
	return res
}

func TestPlan(t *testing.T) {
	host := []string{"192.0.2.1/24", "2001:db8:1::1/64", "fe80::1/64"}
	tests := []struct {
		name     string
		want     []netip.Addr
		observed []kernelAddr
		expect   changes
	}{
		{
			name:     "nothing wanted, nothing ours",
			observed: observed(host...),
		},
		{
			name:     "add missing of both families",
			want:     addrs("192.0.2.100", "2001:db8:1::100"),
			observed: observed(host...),
			expect:   changes{add: addrs("192.0.2.100", "2001:db8:1::100")},
		},
		{
			name:     "keep ours, remove ours not wanted",
			want:     addrs("192.0.2.100"),
			observed: observed(append(host, "192.0.2.100/32*", "192.0.2.101/32*", "2001:db8:1::101/128*")...),
			expect:   changes{remove: prefixes("192.0.2.101/32", "2001:db8:1::101/128")},
		},
		{
			name:     "never remove what is not ours",
			observed: observed(append(host, "192.0.2.200/32", "2001:db8:1::200/128")...),
		},
		{
			name:     "wanted address present without mark is held as it is",
			want:     addrs("192.0.2.1", "192.0.2.200"),
			observed: observed(append(host, "192.0.2.200/32")...),
			expect:   changes{foreign: addrs("192.0.2.1", "192.0.2.200")},
		},
		{
			name:     "ours and a foreign copy of the same address with another length",
			want:     addrs("192.0.2.100"),
			observed: observed(append(host, "192.0.2.100/24", "192.0.2.100/32*")...),
			expect:   changes{foreign: addrs("192.0.2.100")},
		},
		{
			name:     "foreign copy stays when ours goes",
			observed: observed(append(host, "192.0.2.100/24", "192.0.2.100/32*")...),
			expect:   changes{remove: prefixes("192.0.2.100/32")},
		},
	}
	ours := func(o kernelAddr) bool { return o.Proto == AddrProtocol }
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := plan(tt.want, tt.observed, ours)
			if diff := cmp.Diff(tt.expect, got, cmp.AllowUnexported(changes{}), cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
				t.Errorf("plan() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNormalize(t *testing.T) {
	in := append(addrs("2001:db8::1", "192.0.2.2", "::ffff:192.0.2.1", "192.0.2.2", "0.0.0.0", "ff02::1", "127.0.0.1", "fe80::1", "fe80::1%eth0"), netip.Addr{})
	got, err := normalize(in)
	if diff := cmp.Diff(addrs("192.0.2.1", "192.0.2.2", "2001:db8::1"), got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("normalize() (-want +got):\n%s", diff)
	}
	if err == nil {
		t.Fatal("normalize() error = nil, want one for each unusable address")
	}
	for _, s := range []string{"0.0.0.0", "ff02::1", "127.0.0.1", "fe80::1:", "fe80::1%eth0", "invalid address"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not name %s", err, s)
		}
	}
}

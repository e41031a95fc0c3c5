package bgp

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var (
	v4a = netip.MustParseAddr("192.0.2.10")
	v4b = netip.MustParseAddr("192.0.2.11")
	v6a = netip.MustParseAddr("2001:db8::10")
)

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func u32(v uint32) *uint32 { return &v }

var cmpRoutes = cmp.Options{cmpopts.EquateComparable(netip.Prefix{}), cmpopts.EquateEmpty()}

func TestDesired(t *testing.T) {
	holds := func(a netip.Addr) bool { return a == v4b }
	for _, tt := range []struct {
		name    string
		svcs    []Service
		serving bool
		want    []Route
	}{
		{
			name:    "ECMP: every address, whoever holds it; host routes of each family",
			svcs:    []Service{{Addrs: []netip.Addr{v6a, v4a}, ECMP: true, Communities: []string{"1:2"}}},
			serving: true,
			want: []Route{
				{Prefix: pfx("192.0.2.10/32"), Communities: []string{"1:2"}},
				{Prefix: pfx("2001:db8::10/128"), Communities: []string{"1:2"}},
			},
		},
		{
			name:    "proxy: only the held address",
			svcs:    []Service{{Addrs: []netip.Addr{v4a}}, {Addrs: []netip.Addr{v4b}, LocalPref: u32(200)}},
			serving: true,
			want:    []Route{{Prefix: pfx("192.0.2.11/32"), LocalPref: u32(200)}},
		},
		{
			name:    "not serving: nothing",
			svcs:    []Service{{Addrs: []netip.Addr{v4a}, ECMP: true}},
			serving: false,
		},
		{
			name: "a shared address once, communities merged, highest local preference",
			svcs: []Service{
				{Addrs: []netip.Addr{v4a}, ECMP: true, Communities: []string{"2:2", "1:1"}, LocalPref: u32(100)},
				{Addrs: []netip.Addr{v4a}, ECMP: true, Communities: []string{"1:1"}, LocalPref: u32(300)},
			},
			serving: true,
			want:    []Route{{Prefix: pfx("192.0.2.10/32"), Communities: []string{"1:1", "2:2"}, LocalPref: u32(300)}},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := Desired(tt.svcs, tt.serving, holds)
			if diff := cmp.Diff(tt.want, got, cmpRoutes); diff != "" {
				t.Errorf("Desired (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDiff(t *testing.T) {
	have := map[netip.Prefix]Route{
		pfx("192.0.2.10/32"): {Prefix: pfx("192.0.2.10/32")},
		pfx("192.0.2.11/32"): {Prefix: pfx("192.0.2.11/32"), LocalPref: u32(100)},
		pfx("192.0.2.12/32"): {Prefix: pfx("192.0.2.12/32")},
	}
	want := []Route{
		{Prefix: pfx("192.0.2.10/32")},                      // unchanged
		{Prefix: pfx("192.0.2.11/32"), LocalPref: u32(200)}, // changed attribute
		{Prefix: pfx("2001:db8::10/128")},                   // new
	}
	add, del := Diff(have, want)
	if diff := cmp.Diff(want[1:], add, cmpRoutes); diff != "" {
		t.Errorf("add (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]netip.Prefix{pfx("192.0.2.12/32")}, del, cmpRoutes); diff != "" {
		t.Errorf("del (-want +got):\n%s", diff)
	}
}

func TestCarried(t *testing.T) {
	routes := []Route{{Prefix: pfx("192.0.2.10/32")}, {Prefix: pfx("2001:db8::10/128")}}
	v4 := Peer{Name: "v4", Address: netip.MustParseAddr("10.0.0.1")} // its address's family
	v6 := Peer{Name: "v6", Address: netip.MustParseAddr("fd00::1"), Families: []string{"ipv6"}}
	both := Peer{Name: "both", Address: netip.MustParseAddr("fd00::2"), Families: []string{"ipv4", "ipv6"}}
	for _, tt := range []struct {
		name  string
		peers []Peer
		up    map[string]bool
		want  []Route
	}{
		{name: "no session up: nothing", peers: []Peer{v4, v6}, up: map[string]bool{"v4": false}},
		{name: "each route by a session of its family", peers: []Peer{v4, v6}, up: map[string]bool{"v4": true}, want: routes[:1]},
		{name: "both families over one session", peers: []Peer{v4, both}, up: map[string]bool{"both": true}, want: routes},
		{name: "a peer the speaker does not have", peers: []Peer{v6}, up: map[string]bool{"v4": true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Carried(routes, tt.peers, tt.up), cmpRoutes); diff != "" {
				t.Errorf("carried (-want +got):\n%s", diff)
			}
		})
	}
}

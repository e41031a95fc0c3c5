package frr

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// The shape of FRR 8.4's "show ip route <prefix> json".
const routeJSON = `{"198.51.100.1/32":[{"prefix":"198.51.100.1/32","prefixLen":32,"protocol":"bgp","selected":true,
"destSelected":true,"distance":20,"installed":true,"table":254,"nexthops":[
{"flags":3,"fib":true,"ip":"192.0.2.4","afi":"ipv4","interfaceIndex":2,"interfaceName":"eth0","active":true,"weight":1},
{"flags":3,"fib":true,"ip":"192.0.2.2","afi":"ipv4","interfaceIndex":2,"interfaceName":"eth0","active":true,"weight":1},
{"flags":1,"ip":"192.0.2.3","afi":"ipv4","interfaceIndex":2,"interfaceName":"eth0","active":true,"weight":1}]},
{"prefix":"198.51.100.1/32","protocol":"static","selected":false,"installed":false,"nexthops":[{"fib":true,"ip":"192.0.2.9"}]}]}`

func TestParseNexthops(t *testing.T) {
	p := netip.MustParsePrefix("198.51.100.1/32")
	for _, tt := range []struct {
		name string
		in   string
		want []netip.Addr
	}{
		{"the installed next hops of the selected route, sorted", routeJSON,
			[]netip.Addr{netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("192.0.2.4")}},
		{"no route", `{}`, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseNexthops([]byte(tt.in), p)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateComparable(netip.Addr{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("parseNexthops (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := parseNexthops([]byte("% Unknown command"), p); err == nil {
		t.Error("no error for output that is not JSON")
	}
}

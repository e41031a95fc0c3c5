package routeapi

import (
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func addr(typ v1.NodeAddressType, a string) v1.NodeAddress {
	return v1.NodeAddress{Type: typ, Address: a}
}

var dualStackNode = []v1.NodeAddress{
	addr(v1.NodeHostName, "node-1"),
	addr(v1.NodeExternalIP, "203.0.113.1"),
	addr(v1.NodeInternalIP, "fd00::11"),
	addr(v1.NodeInternalIP, "192.0.2.11"),
	addr(v1.NodeInternalIP, "192.0.2.99"),
}

func TestNextHop(t *testing.T) {
	for _, tc := range []struct {
		name  string
		addrs []v1.NodeAddress
		ipv4  bool
		want  string
	}{
		{name: "first InternalIP of the family", addrs: dualStackNode, ipv4: true, want: "192.0.2.11"},
		{name: "IPv6", addrs: dualStackNode, ipv4: false, want: "fd00::11"},
		{name: "ExternalIP when no InternalIP of the family",
			addrs: []v1.NodeAddress{addr(v1.NodeInternalIP, "fd00::11"), addr(v1.NodeExternalIP, "203.0.113.1")}, ipv4: true, want: "203.0.113.1"},
		{name: "IPv4-mapped counts as IPv4", addrs: []v1.NodeAddress{addr(v1.NodeInternalIP, "::ffff:192.0.2.1")}, ipv4: true, want: "192.0.2.1"},
		{name: "garbage and zones skipped",
			addrs: []v1.NodeAddress{addr(v1.NodeInternalIP, "nope"), addr(v1.NodeInternalIP, "fe80::1%eth0"), addr(v1.NodeInternalIP, "fd00::2")}, want: "fd00::2"},
		{name: "none of the family", addrs: []v1.NodeAddress{addr(v1.NodeInternalIP, "192.0.2.1"), addr(v1.NodeHostName, "x")}, ipv4: false},
		{name: "no addresses", ipv4: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := NextHop(tc.addrs, tc.ipv4)
			if tc.want == "" {
				if !errors.Is(err, ErrNoNextHop) {
					t.Fatalf("NextHop = %v, %v; want ErrNoNextHop", got, err)
				}
				return
			}
			if err != nil || got.String() != tc.want {
				t.Errorf("NextHop = %v, %v; want %s", got, err, tc.want)
			}
		})
	}
}

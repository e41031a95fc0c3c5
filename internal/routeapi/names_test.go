package routeapi

import (
	"net/netip"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestObjectName(t *testing.T) {
	long := strings.Repeat("a", 240)
	for _, tc := range []struct {
		node, cidr, want string
	}{
		{"node-1", "10.244.1.0/24", "node-1.10-244-1-0-24"},
		{"node-1", "fd00:10:244:1::/64", "node-1.fd00-10-244-1---64"},
		{"web.rack-1", "10.0.0.0/8", "web.rack-1.10-0-0-0-8"},
		{"n", "1:2:3:4:5:6:7:8/128", "n.1-2-3-4-5-6-7-8-128"},
		// Not valid object names: hashed.
		{long, "10.244.1.0/24", "route-"},
		{"n", "::/0", "route-"},
	} {
		got := ObjectName(tc.node, netip.MustParsePrefix(tc.cidr))
		if !strings.HasPrefix(got, tc.want) || (tc.want != "route-" && got != tc.want) {
			t.Errorf("ObjectName(%.20q, %s) = %q, want %q", tc.node, tc.cidr, got, tc.want)
		}
		if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
			t.Errorf("ObjectName(%.20q, %s) = %q: not an object name: %v", tc.node, tc.cidr, got, errs)
		}
	}
}

// TestObjectNameDistinct: distinct (node, CIDR) pairs never share a name,
// even where node names contain dots and dashes that the encoding uses.
func TestObjectNameDistinct(t *testing.T) {
	nodes := []string{"a", "a.10", "a-10", "a.10-0-0-0-8", "10-0-0-0-8", "a.fd00", "node-1", "node-1.x"}
	cidrs := []string{"10.0.0.0/8", "10.0.0.0/16", "0.0.0.0/0", "fd00::/8", "fd00::/16", "fd00:10::/32",
		"a:b:c:d:e:f:0:1/128", "::/0", "1::/16", "10.0.0.0/24"}
	seen := map[string]string{}
	for _, n := range nodes {
		for _, c := range cidrs {
			name := ObjectName(n, netip.MustParsePrefix(c))
			if prev, dup := seen[name]; dup {
				t.Errorf("%s and %s/%s share the name %q", prev, n, c, name)
			}
			seen[name] = n + "/" + c
		}
	}
}

package cloudroutes

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
)

// dualStackNode's first address of each family is the next hop.
var dualStackNode = []v1.NodeAddress{
	{Type: v1.NodeHostName, Address: "node-1"},
	{Type: v1.NodeInternalIP, Address: "fd00::11"},
	{Type: v1.NodeInternalIP, Address: "192.0.2.11"},
	{Type: v1.NodeInternalIP, Address: "192.0.2.99"},
}

func TestBuild(t *testing.T) {
	for _, tc := range []struct {
		name  string
		route cloudprovider.Route
		want  *v1alpha1.Route
		err   string
	}{
		{
			name:  "IPv4",
			route: cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "10.244.1.0/24", TargetNodeAddresses: dualStackNode},
			want:  newRoute("node-1.10-244-1-0-24", "node-1", "10.244.1.0/24", "192.0.2.11", dualStackNode),
		},
		{
			name:  "IPv6 in canonical form",
			route: cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "FD00:10:244:1:0::/64", TargetNodeAddresses: dualStackNode},
			want:  newRoute("node-1.fd00-10-244-1---64", "node-1", "fd00:10:244:1::/64", "fd00::11", dualStackNode),
		},
		{
			name:  "no address of the family",
			route: cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "fd00:10:244:1::/64", TargetNodeAddresses: dualStackNode[2:]},
			err:   "route fd00:10:244:1::/64 to node node-1: node has no address of the pod CIDR's family",
		},
		{
			name:  "host bits",
			route: cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "10.244.1.1/24", TargetNodeAddresses: dualStackNode},
			err:   `pod CIDR "10.244.1.1/24" has host bits set (want 10.244.1.0/24)`,
		},
		{
			name:  "not a CIDR",
			route: cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "10.244.1.0", TargetNodeAddresses: dualStackNode},
			err:   `pod CIDR "10.244.1.0"`,
		},
		{
			name:  "no node",
			route: cloudprovider.Route{DestinationCIDR: "10.244.1.0/24", TargetNodeAddresses: dualStackNode},
			err:   "route has no target node",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Build(&tc.route)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Build = %v; want error %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Build (-want +got):\n%s", diff)
			}
		})
	}
}

// TestToCloudRoundTrip: what ListRoutes reports for an object Build made is
// what the route controller keeps: same node, CIDR and node addresses.
func TestToCloudRoundTrip(t *testing.T) {
	in := &cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "fd00:10:244:1::/64", TargetNodeAddresses: dualStackNode}
	obj, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	want := &cloudprovider.Route{
		Name: obj.Name, TargetNode: "node-1", DestinationCIDR: "fd00:10:244:1::/64",
		EnableNodeAddresses: true, TargetNodeAddresses: dualStackNode,
	}
	if diff := cmp.Diff(want, ToCloud(obj, false)); diff != "" {
		t.Errorf("ToCloud (-want +got):\n%s", diff)
	}

	// A gone machine's route is a blackhole, as upstream expects one: no
	// target node, so that it is deleted, not kept as the node's route.
	want.TargetNode, want.Blackhole = "", true
	if diff := cmp.Diff(want, ToCloud(obj, true)); diff != "" {
		t.Errorf("ToCloud of a gone machine (-want +got):\n%s", diff)
	}
}

func newRoute(name, node, cidr, hop string, addrs []v1.NodeAddress) *v1alpha1.Route {
	r := &v1alpha1.Route{
		TypeMeta:   metav1.TypeMeta{APIVersion: "groundcloud.io/v1alpha1", Kind: "Route"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.RouteSpec{NodeName: node, DestinationCIDR: cidr, NextHop: hop},
	}
	for _, a := range addrs {
		r.Spec.NodeAddresses = append(r.Spec.NodeAddresses, v1alpha1.NodeAddress{Type: string(a.Type), Address: a.Address})
	}
	return r
}

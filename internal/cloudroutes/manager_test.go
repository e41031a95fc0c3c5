package cloudroutes

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/groundcloud/groundcloud/internal/config"
	"github.com/groundcloud/groundcloud/internal/routeapi"
)

func newManager(t *testing.T, cloudConfig string) (*Manager, *routeapi.Client) {
	t.Helper()
	cfg, err := config.Parse("c.conf", []byte(cloudConfig))
	if err != nil {
		t.Fatal(err)
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{routeapi.Resource: "RouteList"})
	return NewManager(dyn, func() *config.Config { return cfg }), routeapi.NewClient(dyn)
}

const labInventory = `
[Global]
region = lab
[Machine "node-1"]
internal-ip = 192.0.2.11
[Machine "node-2"]
internal-ip = 192.0.2.12
state = gone
[Routes]
`

func TestManager(t *testing.T) {
	ctx := context.Background()
	m, c := newManager(t, labInventory)
	r4 := &cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "10.244.1.0/24", TargetNodeAddresses: dualStackNode}
	r6 := &cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "fd00:10:244:1::/64", TargetNodeAddresses: dualStackNode}
	for _, r := range []*cloudprovider.Route{r4, r6, r4} { // the second create of r4 is a no-op
		if err := m.Create(ctx, r); err != nil {
			t.Fatalf("Create %s: %v", r.DestinationCIDR, err)
		}
	}
	list, err := m.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []*cloudprovider.Route{
		{Name: "node-1.10-244-1-0-24", TargetNode: "node-1", DestinationCIDR: "10.244.1.0/24", EnableNodeAddresses: true, TargetNodeAddresses: dualStackNode},
		{Name: "node-1.fd00-10-244-1---64", TargetNode: "node-1", DestinationCIDR: "fd00:10:244:1::/64", EnableNodeAddresses: true, TargetNodeAddresses: dualStackNode},
	}
	if diff := cmp.Diff(want, list); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}

	// The Node's addresses changed: the route controller deletes and
	// creates; a create over a leftover object updates it.
	moved := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.111"}}
	if err := m.Create(ctx, &cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "10.244.1.0/24", TargetNodeAddresses: moved}); err != nil {
		t.Fatal(err)
	}
	obj, err := c.Get(ctx, "", "node-1.10-244-1-0-24")
	if err != nil || obj.Spec.NextHop != "192.0.2.111" || len(obj.Spec.NodeAddresses) != 1 {
		t.Errorf("after the address change: %+v, %v", obj, err)
	}

	// A route to a gone machine is refused, as a cloud refuses a route to
	// a deleted instance; one that exists is listed as a blackhole.
	err = m.Create(ctx, &cloudprovider.Route{TargetNode: "node-2", DestinationCIDR: "10.244.2.0/24", TargetNodeAddresses: moved})
	if !errors.Is(err, cloudprovider.InstanceNotFound) {
		t.Errorf("Create to a gone machine = %v, want InstanceNotFound", err)
	}
	leftover, _ := Build(&cloudprovider.Route{TargetNode: "node-2", DestinationCIDR: "10.244.2.0/24", TargetNodeAddresses: moved})
	if _, err := c.Create(ctx, leftover); err != nil {
		t.Fatal(err)
	}
	list, _ = m.List(ctx)
	var blackholes []string
	for _, r := range list {
		if r.Blackhole {
			blackholes = append(blackholes, r.Name+" "+string(r.TargetNode))
		}
	}
	if diff := cmp.Diff([]string{"node-2.10-244-2-0-24 "}, blackholes); diff != "" {
		t.Errorf("blackholes (-want +got):\n%s", diff)
	}

	// Delete by the listed name, by node and CIDR, and again (gone: fine).
	for _, r := range []*cloudprovider.Route{list[2], {TargetNode: "node-1", DestinationCIDR: "10.244.1.0/24"}, list[2]} {
		if err := m.Delete(ctx, r); err != nil {
			t.Errorf("Delete %s: %v", r.DestinationCIDR, err)
		}
	}
	list, _ = m.List(ctx)
	if len(list) != 1 || list[0].DestinationCIDR != "fd00:10:244:1::/64" {
		t.Errorf("after deletes: %+v", list)
	}
}

// TestManagerNameClash: an object of the expected name for another route
// (written by hand) is not taken over.
func TestManagerNameClash(t *testing.T) {
	ctx := context.Background()
	m, c := newManager(t, labInventory)
	other := newRoute("node-1.10-244-1-0-24", "node-9", "10.244.9.0/24", "192.0.2.9", nil)
	if _, err := c.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	err := m.Create(ctx, &cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "10.244.1.0/24", TargetNodeAddresses: dualStackNode})
	if err == nil {
		t.Fatal("Create over another route's object succeeded")
	}
}

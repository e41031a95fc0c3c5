package addresspools

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/groundcloud/groundcloud/internal/config"
	"github.com/groundcloud/groundcloud/internal/ipam"
)

// TestReporterWritesOnlyChanges: the first sync creates an object per
// pool; a sync with nothing changed writes nothing; a usage change updates
// one object; a pool gone from the cloud-config is deleted.
func TestReporterWritesOnlyChanges(t *testing.T) {
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{Resource: "AddressPoolList"})
	snap := Snapshot{
		Pools: []*config.Pool{pool(t, "a", "192.0.2.0/28"), pool(t, "b", "192.0.2.16/28")},
		Usage: []ipam.PoolUsage{{Pool: "a", Family: v1.IPv4Protocol, Size: 16}, {Pool: "b", Family: v1.IPv4Protocol, Size: 16}},
	}
	r := NewReporter(dyn, "test", func() Snapshot { return snap })
	ctx := context.Background()
	step := func(name string, want ...string) {
		t.Helper()
		dyn.ClearActions()
		if err := r.sync(ctx); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var got []string
		for _, a := range dyn.Actions() {
			if a.GetVerb() == "list" {
				continue
			}
			got = append(got, a.GetVerb())
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: writes (-want +got):\n%s", name, diff)
		}
	}
	step("first sync", "create", "create")
	step("nothing changed")
	snap.Usage[0].Used = 3
	step("one pool's usage changed", "update")
	snap.Pools = snap.Pools[:1]
	step("pool b removed", "delete")
	if _, err := dyn.Resource(Resource).Get(ctx, "b", metav1.GetOptions{}); err == nil {
		t.Error("AddressPool b still exists")
	}
	r.stored = nil // a resync reads them again
	step("resync, nothing changed")
}

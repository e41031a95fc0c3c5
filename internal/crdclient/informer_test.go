package crdclient

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
)

// listerCase is one type's objects in the fake apiserver and a Get of one
// of them through an informer's Lister.
type listerCase[T Object] struct {
	typ             Type[T]
	stored          []T
	namespace, name string
	want            T // nil: none
}

func runListerCase[T Object](t *testing.T, tc listerCase[T]) {
	t.Helper()
	var seed []runtime.Object
	for _, obj := range tc.stored {
		u, err := tc.typ.ToUnstructured(obj)
		if err != nil {
			t.Fatal(err)
		}
		seed = append(seed, u)
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{tc.typ.Resource: tc.typ.Kind + "List"}, seed...)
	inf := NewInformer(dyn, tc.typ, 0, nil)
	go inf.RunWithContext(t.Context())
	if !cache.WaitForCacheSync(t.Context().Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	l := NewLister(tc.typ, inf)
	got, err := l.Get(tc.namespace, tc.name)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(tc.want, got); diff != "" {
		t.Errorf("Get (-want +got):\n%s", diff)
	}
	all, err := l.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(tc.stored) {
		t.Errorf("List gave %d objects, want %d", len(all), len(tc.stored))
	}
	for _, obj := range inf.GetStore().List() {
		if _, ok := obj.(T); !ok {
			t.Errorf("cache holds %T", obj)
		}
	}
}

func TestLister(t *testing.T) {
	lbs := []*v1alpha1.LoadBalancer{newLoadBalancer("web", "192.0.2.1"), newLoadBalancer("db", "192.0.2.2")}
	rts := []*v1alpha1.Route{newRoute("r1", "192.0.2.1"), newRoute("r2", "192.0.2.2")}
	t.Run("namespaced", func(t *testing.T) {
		runListerCase(t, listerCase[*v1alpha1.LoadBalancer]{typ: loadBalancers, stored: lbs, namespace: "ns", name: "db", want: lbs[1]})
	})
	t.Run("namespaced, other namespace", func(t *testing.T) {
		runListerCase(t, listerCase[*v1alpha1.LoadBalancer]{typ: loadBalancers, stored: lbs, namespace: "other", name: "db"})
	})
	t.Run("namespaced, missing", func(t *testing.T) {
		runListerCase(t, listerCase[*v1alpha1.LoadBalancer]{typ: loadBalancers, stored: lbs, namespace: "ns", name: "gone"})
	})
	t.Run("cluster-scoped", func(t *testing.T) {
		runListerCase(t, listerCase[*v1alpha1.Route]{typ: routes, stored: rts, name: "r2", want: rts[1]})
	})
	t.Run("cluster-scoped, missing", func(t *testing.T) {
		runListerCase(t, listerCase[*v1alpha1.Route]{typ: routes, stored: rts, name: "gone"})
	})
}

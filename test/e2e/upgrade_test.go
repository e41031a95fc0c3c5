package e2e

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/groundcloud/groundcloud/internal/crdinstall"
	"github.com/groundcloud/groundcloud/internal/lbapi"
	"github.com/groundcloud/groundcloud/internal/loadbalancers"
	"github.com/groundcloud/groundcloud/test/framework/controlplane"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// oldBackendsSchema is spec.backends as versions before the agents
// watched the Nodes had it in their CRD.
var oldBackendsSchema = map[string]any{
	"type": "array", "maxItems": int64(5000),
	"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": []any{"nodeName"},
	"items": map[string]any{
		"type": "object", "required": []any{"addresses", "nodeName"},
		"properties": map[string]any{
			"nodeName":  map[string]any{"type": "string", "minLength": int64(1), "maxLength": int64(253)},
			"addresses": map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "x-kubernetes-list-type": "set"},
		},
	},
}

// TestUpgradeFromListedBackends: LoadBalancers written by a version that
// listed the nodes in spec.backends, under that version's CRD, are read
// without them once the controller manager has installed this version's
// CRD (the apiserver prunes the field), by a plain read, a watch and the
// components' informer, with the rest of the spec intact; the next write
// stores them without it.
func TestUpgradeFromListedBackends(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: runs etcd and kube-apiserver")
	}
	ctx := t.Context()
	cp := controlplane.StartT(t, controlplane.Options{})
	dyn, err := dynamic.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	// The old version's CRD: this one's with spec.backends, applied by the
	// controller manager's field manager as the old version did.
	if err := crdinstall.All(ctx, dyn, loadbalancers.FieldManager); err != nil {
		t.Fatal(err)
	}
	crd, err := dyn.Resource(crdResource).Get(ctx, "loadbalancers.groundcloud.io", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	if len(versions) != 1 {
		t.Fatalf("the CRD has %d versions, want 1", len(versions))
	}
	v := versions[0].(map[string]any)
	if err := unstructured.SetNestedField(v, oldBackendsSchema, "schema", "openAPIV3Schema", "properties", "spec", "properties", "backends"); err != nil {
		t.Fatal(err)
	}
	old := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": crd.GetName()},
		"spec":     crd.Object["spec"],
	}}
	if err := unstructured.SetNestedSlice(old.Object, []any{v}, "spec", "versions"); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(crdResource).Apply(ctx, crd.GetName(), old, metav1.ApplyOptions{FieldManager: loadbalancers.FieldManager, Force: true}); err != nil {
		t.Fatal(err)
	}

	lbs := dyn.Resource(lbapi.Resource).Namespace("default")
	backends := []any{
		map[string]any{"nodeName": "node-1", "addresses": []any{"192.0.2.11"}},
		map[string]any{"nodeName": "node-2", "addresses": []any{"192.0.2.12"}},
	}
	for _, name := range []string{"web", "dns"} {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "groundcloud.io/v1alpha1", "kind": "LoadBalancer",
			"metadata": map[string]any{"name": name, "namespace": "default"},
			"spec": map[string]any{
				"addresses":             []any{"192.0.2.200"},
				"ports":                 []any{map[string]any{"name": "http", "protocol": "TCP", "port": int64(80), "nodePort": int64(30080)}},
				"backends":              backends,
				"healthCheck":           map[string]any{"port": int64(10256), "path": "/healthz"},
				"externalTrafficPolicy": "Cluster", "sessionAffinity": "None",
			},
		}}
		// The old schema must have taken effect: an object with backends is
		// stored with them.
		eventually(t, "LoadBalancer "+name+" stored with its backends under the old CRD", func() bool {
			got, err := lbs.Create(ctx, obj, metav1.CreateOptions{})
			if err != nil {
				return false
			}
			if _, found, _ := unstructured.NestedSlice(got.Object, "spec", "backends"); !found {
				_ = lbs.Delete(ctx, name, metav1.DeleteOptions{})
				return false
			}
			return true
		})
	}

	// The upgrade: the new controller manager installs its CRDs.
	if err := crdinstall.All(ctx, dyn, loadbalancers.FieldManager); err != nil {
		t.Fatal(err)
	}
	noBackends := func(u *unstructured.Unstructured) bool {
		_, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "backends")
		return !found
	}
	eventually(t, "reads without spec.backends after the upgrade", func() bool {
		u, err := lbs.Get(ctx, "web", metav1.GetOptions{})
		return err == nil && noBackends(u)
	})
	for _, name := range []string{"web", "dns"} {
		u, err := lbs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		lb, err := lbapi.Type.FromUnstructured(u)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !noBackends(u) || !slices.Equal(lb.Spec.Addresses, []string{"192.0.2.200"}) || len(lb.Spec.Ports) != 1 || lb.Spec.Ports[0].NodePort != 30080 ||
			lb.Spec.HealthCheck == nil || lb.Spec.HealthCheck.Port != 10256 {
			t.Errorf("%s after the upgrade: %v", name, u.Object["spec"])
		}
	}

	// The components' informer (typed cache, lbapi.NewInformer) reads them.
	inf := lbapi.NewInformer(dyn, 0)
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	cached, err := lbapi.NewLister(inf).List()
	if err != nil || len(cached) != 2 {
		t.Fatalf("informer lists %d LoadBalancers (%v), want 2", len(cached), err)
	}

	// A write (here: a label, as any update) stores the object without the
	// field. Seen with the old CRD back (a rollback): the object written
	// since has no backends in etcd any more, the other still has them.
	u, err := lbs.Get(ctx, "dns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.SetLabels(map[string]string{"touched": "yes"})
	if _, err := lbs.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(crdResource).Apply(ctx, crd.GetName(), old, metav1.ApplyOptions{FieldManager: loadbalancers.FieldManager, Force: true}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "web read with its backends again under the old CRD", func() bool {
		u, err := lbs.Get(ctx, "web", metav1.GetOptions{})
		return err == nil && !noBackends(u)
	})
	if u, err := lbs.Get(ctx, "dns", metav1.GetOptions{}); err != nil || !noBackends(u) {
		t.Errorf("dns, written after the upgrade, still has its backends in etcd (%v): %v", err, u)
	}
}

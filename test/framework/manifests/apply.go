package manifests

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
)

// installOrder ranks kinds so that definitions, identities and permissions
// exist before what uses them; other kinds follow in their given order.
var installOrder = []string{
	"CustomResourceDefinition", "Namespace", "PriorityClass",
	"ServiceAccount", "ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding",
	"Secret", "ConfigMap",
}

// ApplyWithConfig is Apply with the dynamic client and a discovery-backed
// mapper built from cfg.
func ApplyWithConfig(ctx context.Context, cfg *rest.Config, objs []*unstructured.Unstructured, fieldManager string) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	return Apply(ctx, dyn, mapper, objs, fieldManager)
}

// Apply server-side-applies objs as fieldManager, forcing ownership of the
// fields they set (they are ours; a field another manager changed is taken
// back), with fieldValidation=Strict: an unknown or duplicate field is an
// error, not a warning. Objects go in installOrder, otherwise in the order
// given; the first failure stops it. mapper resolves kinds to resources; a
// kind defined by a CRD in the same call is not supported (the mapper would
// not know it yet). Whoever applies RBAC objects needs the permissions they
// grant.
func Apply(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, objs []*unstructured.Unstructured, fieldManager string) error {
	for _, obj := range inInstallOrder(objs) {
		if err := applyOne(ctx, dyn, mapper, obj, fieldManager); err != nil {
			return fmt.Errorf("apply %s %s: %w", obj.GetKind(), key(obj), err)
		}
	}
	return nil
}

func applyOne(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, obj *unstructured.Unstructured, fieldManager string) error {
	gvk := obj.GroupVersionKind()
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	var res dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			return fmt.Errorf("namespaced %s without metadata.namespace", gvk.Kind)
		}
		res = dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
	}
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return err
	}
	_, err = res.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{
		FieldManager:    fieldManager,
		Force:           ptr.To(true),
		FieldValidation: metav1.FieldValidationStrict,
	})
	return err
}

// inInstallOrder returns a copy of objs, stably sorted by installOrder.
func inInstallOrder(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	rank := func(o *unstructured.Unstructured) int {
		if i := slices.Index(installOrder, o.GetKind()); i >= 0 {
			return i
		}
		return len(installOrder)
	}
	sorted := slices.Clone(objs)
	slices.SortStableFunc(sorted, func(a, b *unstructured.Unstructured) int { return rank(a) - rank(b) })
	return sorted
}

// key is namespace/name, or name for a cluster-scoped object.
func key(obj *unstructured.Unstructured) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}

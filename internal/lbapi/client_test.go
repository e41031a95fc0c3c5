package lbapi

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
)

func TestTransform(t *testing.T) {
	lb := &v1alpha1.LoadBalancer{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Generation: 3,
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x", Operation: metav1.ManagedFieldsOperationApply}}},
		Spec: v1alpha1.LoadBalancerSpec{Addresses: []string{"192.0.2.1"}},
	}
	u, err := ToUnstructured(lb)
	if err != nil {
		t.Fatal(err)
	}
	// As written by earlier versions, which listed the nodes in the spec:
	// read all the same, the list ignored.
	if err := unstructured.SetNestedSlice(u.Object, []any{map[string]any{"nodeName": "n1", "addresses": []any{"10.0.0.1"}}}, "spec", "backends"); err != nil {
		t.Fatal(err)
	}
	out, err := Transform(u)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := out.(*v1alpha1.LoadBalancer)
	if !ok {
		t.Fatalf("Transform gave %T, want *v1alpha1.LoadBalancer", out)
	}
	if got.ManagedFields != nil || got.Name != "web" || got.Generation != 3 || got.Spec.Addresses[0] != "192.0.2.1" {
		t.Errorf("Transform = %+v", got)
	}
	if same, err := FromUnstructured(got); err != nil || same != got {
		t.Errorf("FromUnstructured(typed) = %p, %v; want the object itself", same, err)
	}

	// An object that does not convert stays as it came (without
	// managedFields), and FromUnstructured reports it.
	bad := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.SchemeGroupVersion.String(), "kind": "LoadBalancer",
		"metadata": map[string]any{"name": "bad", "namespace": "ns", "managedFields": []any{map[string]any{"manager": "x"}}},
		"spec":     map[string]any{"addresses": "not a list"},
	}}
	out, err = Transform(bad)
	if err != nil || out != bad {
		t.Fatalf("Transform(bad) = %T, %v; want the object itself", out, err)
	}
	if bad.GetManagedFields() != nil {
		t.Error("managedFields kept")
	}
	if _, err := FromUnstructured(out); err == nil {
		t.Error("FromUnstructured(bad) succeeded")
	}
}

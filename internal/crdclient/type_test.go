package crdclient

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
)

var someManagedFields = []metav1.ManagedFieldsEntry{{Manager: "x", Operation: metav1.ManagedFieldsOperationApply}}

// unconvertible is a LoadBalancer whose spec does not convert, with
// managedFields.
func unconvertible() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "groundcloud.io/v1alpha1", "kind": "LoadBalancer",
		"metadata": map[string]any{"name": "bad", "namespace": "ns", "managedFields": []any{map[string]any{"manager": "x"}}},
		"spec":     map[string]any{"addresses": "not a list"},
	}}
}

func TestTransform(t *testing.T) {
	withManagedFields := func(lb *v1alpha1.LoadBalancer) *v1alpha1.LoadBalancer {
		lb.ManagedFields = someManagedFields
		return lb
	}
	asUnstructured := func(lb *v1alpha1.LoadBalancer) *unstructured.Unstructured {
		u, err := loadBalancers.ToUnstructured(lb)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	tombstone := cache.DeletedFinalStateUnknown{Key: "ns/web"}
	for _, tc := range []struct {
		name         string
		in           any
		want         any
		same         bool // the object itself comes back
		wantPrepared bool
	}{
		{name: "unstructured to typed without managedFields",
			in:   asUnstructured(withManagedFields(newLoadBalancer("web", "192.0.2.1"))),
			want: newLoadBalancer("web", "192.0.2.1"), wantPrepared: true},
		{name: "typed kept, without managedFields",
			in:   withManagedFields(newLoadBalancer("web", "192.0.2.1")),
			want: newLoadBalancer("web", "192.0.2.1"), same: true, wantPrepared: true},
		{name: "unconvertible kept as it came, without managedFields",
			in: unconvertible(), want: func() any { u := unconvertible(); u.SetManagedFields(nil); return u }(), same: true},
		{name: "another object as is", in: tombstone, want: tombstone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prepared := 0
			got, err := loadBalancers.Transform(func(*v1alpha1.LoadBalancer) { prepared++ })(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Transform (-want +got):\n%s", diff)
			}
			if tc.same && got != tc.in {
				t.Error("Transform returned a copy, want the object itself")
			}
			if (prepared > 0) != tc.wantPrepared {
				t.Errorf("prepare called %d times, want it: %v", prepared, tc.wantPrepared)
			}
		})
	}
	t.Run("without prepare", func(t *testing.T) {
		got, err := routes.Transform(nil)(newRoute("r1", "192.0.2.1"))
		if err != nil || got == nil {
			t.Errorf("Transform = %v, %v", got, err)
		}
	})
}

func TestFromUnstructured(t *testing.T) {
	typed := newLoadBalancer("web", "192.0.2.1")
	badRoute := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "groundcloud.io/v1alpha1", "kind": "Route",
		"metadata": map[string]any{"name": "bad"}, "spec": map[string]any{"nextHop": 7},
	}}
	for _, tc := range []struct {
		name    string
		convert func() (any, error)
		want    any
		wantErr string // the error's start ("": none)
	}{
		{name: "typed object itself", convert: func() (any, error) { return loadBalancers.FromUnstructured(typed) }, want: typed},
		{name: "namespaced, does not convert", convert: func() (any, error) { return loadBalancers.FromUnstructured(unconvertible()) },
			want: (*v1alpha1.LoadBalancer)(nil), wantErr: "convert LoadBalancer ns/bad: "},
		{name: "cluster-scoped, does not convert", convert: func() (any, error) { return routes.FromUnstructured(badRoute) },
			want: (*v1alpha1.Route)(nil), wantErr: "convert Route bad: "},
		{name: "not an object", convert: func() (any, error) { return routes.FromUnstructured("x") },
			want: (*v1alpha1.Route)(nil), wantErr: "unexpected object string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.convert()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantErr)):
				t.Fatalf("error = %v, want %q…", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

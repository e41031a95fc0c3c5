package crdclient

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
)

// The two types the tests use: one namespaced, one cluster-scoped.
var (
	loadBalancers = Namespaced[v1alpha1.LoadBalancer](v1alpha1.SchemeGroupVersion.WithResource("loadbalancers"), "LoadBalancer")
	routes        = ClusterScoped[v1alpha1.Route](v1alpha1.SchemeGroupVersion.WithResource("routes"), "Route")
)

func newLoadBalancer(name string, addresses ...string) *v1alpha1.LoadBalancer {
	lb := &v1alpha1.LoadBalancer{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec:       v1alpha1.LoadBalancerSpec{Addresses: addresses},
	}
	lb.GetObjectKind().SetGroupVersionKind(loadBalancers.gvk())
	return lb
}

func newRoute(name, nextHop string) *v1alpha1.Route {
	r := &v1alpha1.Route{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.RouteSpec{NodeName: "node-1", DestinationCIDR: "10.244.1.0/24", NextHop: nextHop},
	}
	r.GetObjectKind().SetGroupVersionKind(routes.gvk())
	return r
}

// fixture is one type's objects for the verb tests: stored is in the fake
// apiserver, fresh is not, and edited is stored with another spec.
type fixture[T Object] struct {
	typ                   Type[T]
	stored, fresh, edited T
}

// request is what one call sent the apiserver. Body is, for a create or
// update, the object's apiVersion and kind; for an apply, the patch.
type request struct {
	Verb, Namespace, Resource, Subresource, Name string
	FieldManager, Body                           string
	Force                                        bool
}

func requestsOf(t *testing.T, actions []k8stesting.Action) []request {
	t.Helper()
	var out []request
	for _, a := range actions {
		r := request{Verb: a.GetVerb(), Namespace: a.GetNamespace(), Resource: a.GetResource().Resource, Subresource: a.GetSubresource()}
		switch a := a.(type) {
		case k8stesting.GetActionImpl:
			r.Name = a.Name
		case k8stesting.DeleteActionImpl:
			r.Name = a.Name
		case k8stesting.CreateActionImpl:
			r.Name, r.FieldManager, r.Body = written(t, a.Object, a.CreateOptions.FieldManager)
		case k8stesting.UpdateActionImpl:
			r.Name, r.FieldManager, r.Body = written(t, a.Object, a.UpdateOptions.FieldManager)
		case k8stesting.PatchActionImpl:
			r.Name, r.FieldManager, r.Body = a.Name, a.PatchOptions.FieldManager, strings.TrimSpace(string(a.Patch))
			r.Force = a.PatchOptions.Force != nil && *a.PatchOptions.Force
		}
		out = append(out, r)
	}
	return out
}

func written(t *testing.T, obj runtime.Object, fieldManager string) (name, fm, body string) {
	t.Helper()
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		t.Fatalf("wrote %T, want *unstructured.Unstructured", obj)
	}
	return u.GetName(), fieldManager, u.GetAPIVersion() + " " + u.GetKind()
}

// verbCase is one call of a Client: what it must send and return.
type verbCase[T Object] struct {
	name    string
	call    func(context.Context, *Client[T]) (any, error)
	want    []request
	wantObj any              // what the call returns (nil: no object)
	wantErr func(error) bool // nil: no error
}

// verbCases are the same calls for either type; ns is the namespace of its
// objects ("" when cluster-scoped), and status what ApplyStatus writes.
func verbCases[T Object](f fixture[T], ns string, status map[string]any, patch string) []verbCase[T] {
	res := f.typ.Resource.Resource
	name := f.stored.GetName()
	kind := "groundcloud.io/v1alpha1 " + f.typ.Kind
	var none T // what a failed call returns
	return []verbCase[T]{
		{name: "get", call: func(ctx context.Context, c *Client[T]) (any, error) { return c.Get(ctx, ns, name) },
			want: []request{{Verb: "get", Namespace: ns, Resource: res, Name: name}}, wantObj: f.stored},
		{name: "get missing", call: func(ctx context.Context, c *Client[T]) (any, error) { return c.Get(ctx, ns, "gone") },
			want: []request{{Verb: "get", Namespace: ns, Resource: res, Name: "gone"}}, wantObj: none, wantErr: apierrors.IsNotFound},
		{name: "list", call: func(ctx context.Context, c *Client[T]) (any, error) { return c.List(ctx) },
			want: []request{{Verb: "list", Resource: res}}, wantObj: []T{f.stored}},
		{name: "create", call: func(ctx context.Context, c *Client[T]) (any, error) { return c.Create(ctx, f.fresh) },
			want:    []request{{Verb: "create", Namespace: ns, Resource: res, Name: f.fresh.GetName(), FieldManager: "writer", Body: kind}},
			wantObj: f.fresh},
		{name: "create existing", call: func(ctx context.Context, c *Client[T]) (any, error) { return c.Create(ctx, f.stored) },
			want:    []request{{Verb: "create", Namespace: ns, Resource: res, Name: name, FieldManager: "writer", Body: kind}},
			wantObj: none, wantErr: apierrors.IsAlreadyExists},
		{name: "update", call: func(ctx context.Context, c *Client[T]) (any, error) { return c.Update(ctx, f.edited) },
			want:    []request{{Verb: "update", Namespace: ns, Resource: res, Name: name, FieldManager: "writer", Body: kind}},
			wantObj: f.edited},
		{name: "update missing", call: func(ctx context.Context, c *Client[T]) (any, error) { return c.Update(ctx, f.fresh) },
			want:    []request{{Verb: "update", Namespace: ns, Resource: res, Name: f.fresh.GetName(), FieldManager: "writer", Body: kind}},
			wantObj: none, wantErr: apierrors.IsNotFound},
		{name: "delete", call: func(ctx context.Context, c *Client[T]) (any, error) {
			return nil, c.Delete(ctx, ns, name, metav1.DeleteOptions{})
		}, want: []request{{Verb: "delete", Namespace: ns, Resource: res, Name: name}}},
		{name: "delete missing", call: func(ctx context.Context, c *Client[T]) (any, error) {
			return nil, c.Delete(ctx, ns, "gone", metav1.DeleteOptions{})
		}, want: []request{{Verb: "delete", Namespace: ns, Resource: res, Name: "gone"}}, wantErr: apierrors.IsNotFound},
		{name: "apply status", call: func(ctx context.Context, c *Client[T]) (any, error) {
			return nil, c.ApplyStatus(ctx, ns, name, "host/a", status)
		}, want: []request{{Verb: "patch", Namespace: ns, Resource: res, Subresource: "status", Name: name,
			FieldManager: "host/a", Body: patch, Force: true}}},
	}
}

func runVerbCases[T Object](t *testing.T, f fixture[T], cases []verbCase[T]) {
	for _, tc := range cases {
		t.Run(f.typ.Kind+"/"+tc.name, func(t *testing.T) {
			seed, err := f.typ.ToUnstructured(f.stored)
			if err != nil {
				t.Fatal(err)
			}
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{f.typ.Resource: f.typ.Kind + "List"}, seed)
			// The fake's tracker cannot apply to unstructured objects: the
			// apply is answered with the stored object.
			dyn.PrependReactor("patch", f.typ.Resource.Resource, func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, seed.DeepCopy(), nil
			})
			got, err := tc.call(t.Context(), New(dyn, f.typ, "writer"))
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("error: %v", err)
			case tc.wantErr != nil && !tc.wantErr(err):
				t.Fatalf("error = %v, not the one wanted", err)
			}
			if diff := cmp.Diff(tc.want, requestsOf(t, dyn.Actions())); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantObj, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
		})
	}
}

func TestClientVerbs(t *testing.T) {
	lbs := fixture[*v1alpha1.LoadBalancer]{typ: loadBalancers,
		stored: newLoadBalancer("web", "192.0.2.1"), fresh: newLoadBalancer("new"), edited: newLoadBalancer("web", "192.0.2.2")}
	runVerbCases(t, lbs, verbCases(lbs, "ns",
		map[string]any{"addresses": []any{map[string]any{"ip": "192.0.2.1"}}},
		`{"apiVersion":"groundcloud.io/v1alpha1","kind":"LoadBalancer","metadata":{"name":"web","namespace":"ns"},"status":{"addresses":[{"ip":"192.0.2.1"}]}}`))

	rts := fixture[*v1alpha1.Route]{typ: routes,
		stored: newRoute("r1", "192.0.2.1"), fresh: newRoute("r2", "192.0.2.2"), edited: newRoute("r1", "192.0.2.3")}
	runVerbCases(t, rts, verbCases(rts, "",
		map[string]any{"hosts": []any{map[string]any{"name": "a"}}},
		`{"apiVersion":"groundcloud.io/v1alpha1","kind":"Route","metadata":{"name":"r1"},"status":{"hosts":[{"name":"a"}]}}`))
}

// TestClusterScopedIgnoresNamespace: a namespace passed for a
// cluster-scoped type is not sent.
func TestClusterScopedIgnoresNamespace(t *testing.T) {
	dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	c := New(dyn, routes, "")
	_, _ = c.Get(t.Context(), "ns", "r1")
	_ = c.Delete(t.Context(), "ns", "r1", metav1.DeleteOptions{})
	_ = c.ApplyStatus(t.Context(), "ns", "r1", "host/a", map[string]any{})
	for _, a := range dyn.Actions() {
		if a.GetNamespace() != "" {
			t.Errorf("%s sent namespace %q", a.GetVerb(), a.GetNamespace())
		}
	}
}

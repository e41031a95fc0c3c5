package lbapi

import (
	"encoding/json"
	"testing"
	"unsafe"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
)

// transform is NewInformer's cache.TransformFunc.
var transform = Type.Transform(intern)

// TestTransform: the informer's objects are typed, without managedFields;
// one written by earlier versions, which listed the nodes in the spec, is
// read all the same, the list ignored.
func TestTransform(t *testing.T) {
	lb := &v1alpha1.LoadBalancer{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Generation: 3,
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x", Operation: metav1.ManagedFieldsOperationApply}}},
		Spec: v1alpha1.LoadBalancerSpec{Addresses: []string{"192.0.2.1"}},
	}
	u, err := Type.ToUnstructured(lb)
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedSlice(u.Object, []any{map[string]any{"nodeName": "n1", "addresses": []any{"10.0.0.1"}}}, "spec", "backends"); err != nil {
		t.Fatal(err)
	}
	out, err := transform(u)
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
}

// Two LoadBalancers decoded apart share the strings that repeat (here a
// host's condition message and the namespace), and interning changes no
// value.
func TestTransformInterns(t *testing.T) {
	decode := func(name string) (*v1alpha1.LoadBalancer, *v1alpha1.LoadBalancer) {
		lb := &v1alpha1.LoadBalancer{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Labels: map[string]string{"app": "web"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: name}}},
			Spec: v1alpha1.LoadBalancerSpec{Addresses: []string{"192.0.2.1"}, ExternalTrafficPolicy: "Cluster",
				Ports:       []v1alpha1.Port{{Name: "http", Protocol: "TCP", Port: 80, NodePort: 30080}},
				HealthCheck: &v1alpha1.HealthCheck{Type: "HTTP", Port: 10256, Path: "/healthz"}},
			Status: v1alpha1.LoadBalancerStatus{Hosts: []v1alpha1.HostStatus{{Name: "lb-1", Conditions: []metav1.Condition{
				{Type: "Programmed", Status: metav1.ConditionTrue, Reason: "Programmed", Message: "data plane programmed"}}}}},
		}
		lb.APIVersion, lb.Kind = v1alpha1.SchemeGroupVersion.String(), "LoadBalancer"
		// Decoded from JSON as a watch decodes it: every string a copy
		// of its own.
		data, err := json.Marshal(lb)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			t.Fatal(err)
		}
		out, err := transform(u)
		if err != nil {
			t.Fatal(err)
		}
		return lb, out.(*v1alpha1.LoadBalancer)
	}
	want, a := decode("web")
	if !equality.Semantic.DeepEqual(a, want) {
		t.Errorf("Transform changed the object:\n got %+v\nwant %+v", a, want)
	}
	_, b := decode("shop")
	for _, s := range []struct{ what, a, b string }{
		{"namespace", a.Namespace, b.Namespace},
		{"label value", a.Labels["app"], b.Labels["app"]},
		{"owner kind", a.OwnerReferences[0].Kind, b.OwnerReferences[0].Kind},
		{"health check path", a.Spec.HealthCheck.Path, b.Spec.HealthCheck.Path},
		{"host name", a.Status.Hosts[0].Name, b.Status.Hosts[0].Name},
		{"condition message", a.Status.Hosts[0].Conditions[0].Message, b.Status.Hosts[0].Conditions[0].Message},
	} {
		if unsafe.StringData(s.a) != unsafe.StringData(s.b) {
			t.Errorf("%s %q: two copies", s.what, s.a)
		}
	}
	if _, again := decode("web"); unsafe.StringData(a.Name) == unsafe.StringData(again.Name) {
		t.Error("an object's own name was interned")
	}
}

package realcluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestManifest(t *testing.T) {
	svc := LoadBalancerService("default", "web")
	svc.Annotations = map[string]string{"groundcloud.io/pool": "bgp"}
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	for _, tt := range []struct {
		name    string
		objects []runtime.Object
		want    string
	}{
		{"a Service as a user writes it: kind, no status, no empty fields", []runtime.Object{svc}, `apiVersion: v1
kind: Service
metadata:
  annotations:
    groundcloud.io/pool: bgp
  name: web
  namespace: default
spec:
  externalTrafficPolicy: Local
  ports:
  - name: http
    port: 80
    protocol: TCP
    targetPort: 8080
  selector:
    app: web
  type: LoadBalancer
`},
		{"documents joined", []runtime.Object{&corev1.Namespace{}, &corev1.Namespace{}}, "apiVersion: v1\nkind: Namespace\n---\napiVersion: v1\nkind: Namespace\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Manifest(tt.objects...)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Manifest (-want +got):\n%s", diff)
			}
		})
	}
	if svc.Kind != "" {
		t.Errorf("Manifest set the kind of its argument: %q", svc.Kind)
	}
}

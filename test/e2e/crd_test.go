package e2e

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/groundcloud/groundcloud/internal/crdinstall"
	"github.com/groundcloud/groundcloud/internal/lbapi"
	"github.com/groundcloud/groundcloud/test/framework/controlplane"
)

// TestCRDValidation installs the CRDs as the controller manager does and
// checks that the apiserver rejects malformed LoadBalancers with the
// schema's and CEL rules' messages, and accepts a well-formed one.
func TestCRDValidation(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: runs etcd and kube-apiserver")
	}
	cp := controlplane.StartT(t, controlplane.Options{})
	dyn, err := dynamic.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := crdinstall.All(t.Context(), dyn, "test"); err != nil {
		t.Fatal(err)
	}
	// Installing again (an upgrade at the next start) is a no-op.
	if err := crdinstall.All(t.Context(), dyn, "test"); err != nil {
		t.Fatal(err)
	}

	good := func() map[string]any {
		return map[string]any{
			"addresses":             []any{"192.0.2.10", "2001:db8::10"},
			"ports":                 []any{map[string]any{"protocol": "TCP", "port": int64(80), "nodePort": int64(30080)}},
			"healthCheck":           map[string]any{"port": int64(10256), "path": "/healthz"},
			"externalTrafficPolicy": "Cluster",
			"sessionAffinity":       "None",
		}
	}
	tests := []struct {
		name    string
		mutate  func(map[string]any)
		wantErr string
	}{
		{name: "well-formed"},
		{name: "bad address", mutate: func(s map[string]any) { s["addresses"] = []any{"192.0.2.300"} }, wantErr: "must be an IPv4 or IPv6 address"},
		{name: "two IPv4 addresses", mutate: func(s map[string]any) { s["addresses"] = []any{"192.0.2.10", "192.0.2.11"} }, wantErr: "at most one address per family"},
		{name: "no addresses", mutate: func(s map[string]any) { s["addresses"] = []any{} }, wantErr: "addresses"},
		{name: "port 0", mutate: func(s map[string]any) {
			s["ports"] = []any{map[string]any{"protocol": "TCP", "port": int64(0), "nodePort": int64(30080)}}
		}, wantErr: "ports[0].port"},
		{name: "SCTP", mutate: func(s map[string]any) {
			s["ports"] = []any{map[string]any{"protocol": "SCTP", "port": int64(80), "nodePort": int64(30080)}}
		}, wantErr: "Unsupported value"},
		{name: "bad source range", mutate: func(s map[string]any) { s["sourceRanges"] = []any{"10.0.0.0/33"} }, wantErr: "must be a CIDR"},
		{name: "Local without health check", mutate: func(s map[string]any) {
			s["externalTrafficPolicy"] = "Local"
			delete(s, "healthCheck")
		}, wantErr: "externalTrafficPolicy Local needs a healthCheck"},
		{name: "TCP health check, no path", mutate: func(s map[string]any) {
			s["healthCheck"] = map[string]any{"type": "TCP", "port": int64(30080)}
		}},
		{name: "HTTP health check without a path", mutate: func(s map[string]any) {
			s["healthCheck"] = map[string]any{"type": "HTTP", "port": int64(10256)}
		}, wantErr: "an HTTP health check needs a path"},
		{name: "health check defaults to HTTP", mutate: func(s map[string]any) {
			s["healthCheck"] = map[string]any{"port": int64(10256)}
		}, wantErr: "an HTTP health check needs a path"},
		{name: "affinity timeout without affinity", mutate: func(s map[string]any) { s["sessionAffinityTimeoutSeconds"] = int64(60) }, wantErr: "needs sessionAffinity ClientIP"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := good()
			if tt.mutate != nil {
				tt.mutate(spec)
			}
			obj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "groundcloud.io/v1alpha1",
				"kind":       "LoadBalancer",
				"metadata": map[string]any{"name": "lb-" + string(rune('a'+i)), "namespace": "default",
					"annotations": map[string]any{"groundcloud.io/ports": "80/TCP", "groundcloud.io/addresses": "192.0.2.10,2001:db8::10"}},
				"spec": spec,
			}}
			_, err := dyn.Resource(lbapi.Resource).Namespace("default").Create(t.Context(), obj, metav1.CreateOptions{})
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("well-formed object rejected: %v", err)
			case tt.wantErr != "" && err == nil:
				t.Fatalf("malformed object accepted")
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Fatalf("rejected with %v, want a message containing %q", err, tt.wantErr)
			}
		})
	}

	out, err := cp.Kubectl(t.Context(), "get", "loadbalancers", "-A")
	if err != nil {
		t.Fatalf("kubectl: %v\n%s", err, out)
	}
	for _, col := range []string{"ADDRESSES", "PORTS", "READY", "AGE", "192.0.2.10,2001:db8::10", "80/TCP"} {
		if !strings.Contains(string(out), col) {
			t.Errorf("kubectl get loadbalancers lacks %q:\n%s", col, out)
		}
	}
}

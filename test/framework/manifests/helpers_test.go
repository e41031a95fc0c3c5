package manifests

import (
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/groundcloud/groundcloud/test/framework/controlplane"
)

// installFieldManager is the field manager of the tests' applies.
const installFieldManager = "groundcloud-manifests-test"

// renderDeploy renders deploy/ with the pinned kubectl, as
// `kubectl apply -k deploy/` does. Skipped with -short: the tools may need
// building.
func renderDeploy(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	return renderKustomization(t, "deploy")
}

// renderAll renders everything groundcloud ships: deploy/ and the
// optional deploy/router/.
func renderAll(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	return append(renderKustomization(t, "deploy"), renderKustomization(t, "deploy/router")...)
}

// renderKustomization renders a directory of the repository (slash
// separated) with the pinned kubectl.
func renderKustomization(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	if testing.Short() {
		t.Skip("renders deploy/ with the pinned kubectl; skipped with -short")
	}
	bin, err := controlplane.ToolsDir(t.Context())
	if err != nil {
		t.Fatalf("tools: %v", err)
	}
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Render(t.Context(), filepath.Join(bin, "kubectl"), filepath.Join(root, filepath.FromSlash(dir)))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// object returns the rendered object of that kind and name as T.
func object[T any](t *testing.T, objs []*unstructured.Unstructured, kind, name string) *T {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			out := new(T)
			if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, out, true); err != nil {
				t.Fatalf("%s %s: %v", kind, name, err)
			}
			return out
		}
	}
	t.Fatalf("deploy/ renders no %s %s", kind, name)
	return nil
}

// applyAll server-side-applies objs to the test bed as the admin.
func applyAll(t *testing.T, cp *controlplane.ControlPlane, objs []*unstructured.Unstructured) error {
	t.Helper()
	cfg := cp.RESTConfig()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	return Apply(t.Context(), dyn, mapper, objs, installFieldManager)
}

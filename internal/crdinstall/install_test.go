package crdinstall

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
)

// established is a CRD named name whose Established condition is True.
func established(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": name},
		"status":   map[string]any{"conditions": []any{map[string]any{"type": "Established", "status": "True"}}},
	}}
}

func TestAll(t *testing.T) {
	errApply := errors.New("refused")
	for _, tc := range []struct {
		name        string
		applyErr    error
		wantApplied []string
		wantErr     error
	}{
		{name: "every CRD, in the order of its file",
			wantApplied: []string{"addresspools.groundcloud.io", "loadbalancers.groundcloud.io", "routes.groundcloud.io"}},
		{name: "an apply fails", applyErr: errApply,
			wantApplied: []string{"addresspools.groundcloud.io"}, wantErr: errApply},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
			var applied []string
			dyn.PrependReactor("patch", "customresourcedefinitions", func(a k8stesting.Action) (bool, runtime.Object, error) {
				p := a.(k8stesting.PatchActionImpl)
				if p.PatchOptions.FieldManager != "installer" || p.PatchOptions.Force == nil || !*p.PatchOptions.Force {
					t.Errorf("apply of %s with %+v, want field manager installer, forced", p.Name, p.PatchOptions)
				}
				applied = append(applied, p.Name)
				return true, established(p.Name), tc.applyErr
			})
			dyn.PrependReactor("get", "customresourcedefinitions", func(a k8stesting.Action) (bool, runtime.Object, error) {
				return true, established(a.(k8stesting.GetActionImpl).Name), nil
			})
			err := All(t.Context(), dyn, "installer")
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("All = %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantApplied, applied); diff != "" {
				t.Errorf("applied (-want +got):\n%s", diff)
			}
		})
	}
}

package manifests

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/groundcloud/groundcloud/internal/addresspools"
	"github.com/groundcloud/groundcloud/test/framework/controlplane"
)

const addressPoolPolicyMessage = "AddressPools are written by the groundcloud controller manager only"

// TestOnlyTheControllerManagerWritesAddressPools applies deploy/ to a real
// apiserver: a cluster admin may neither create nor change an AddressPool;
// the controller manager's ServiceAccount, with deploy/'s rules, may create,
// update and delete one.
func TestOnlyTheControllerManagerWritesAddressPools(t *testing.T) {
	cp := controlplane.StartT(t, controlplane.Options{})
	ctx := t.Context()
	if err := applyAll(t, cp, renderDeploy(t)); err != nil {
		t.Fatal(err)
	}
	admin := poolClient(t, dynamic.NewForConfigOrDie(cp.RESTConfig()))
	ccm := poolClient(t, dynamic.NewForConfigOrDie(serviceAccountConfig(t, cp, "groundcloud-controller-manager")))

	waitFor(t, "the admission policy to refuse an admin", 60*time.Second, func() (bool, error) {
		_, err := admin.Create(ctx, poolSpecimen("probe"), metav1.CreateOptions{})
		if err == nil {
			_ = admin.Delete(ctx, "probe", metav1.DeleteOptions{})
			return false, nil
		}
		return strings.Contains(err.Error(), addressPoolPolicyMessage), nil
	})

	created, err := ccm.Create(ctx, poolSpecimen("default"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create by the controller manager: %v", err)
	}
	_ = unstructured.SetNestedField(created.Object, int64(1), "status", "orphaned")
	updated, err := ccm.Update(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update by the controller manager: %v", err)
	}
	_ = unstructured.SetNestedField(updated.Object, int64(0), "status", "orphaned")
	if _, err := admin.Update(ctx, updated, metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), addressPoolPolicyMessage) {
		t.Errorf("update by an admin: %v, want refused by the policy", err)
	} else {
		t.Logf("update by an admin: %v", err)
	}
	if err := ccm.Delete(ctx, "default", metav1.DeleteOptions{}); err != nil {
		t.Errorf("delete by the controller manager: %v", err)
	}
}

func poolClient(t *testing.T, dyn dynamic.Interface) dynamic.ResourceInterface {
	t.Helper()
	return dyn.Resource(addresspools.Resource)
}

// poolSpecimen is an AddressPool as the controller manager writes one.
func poolSpecimen(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "groundcloud.io/v1alpha1",
		"kind":       "AddressPool",
		"metadata":   map[string]any{"name": name},
		"spec":       map[string]any{"ranges": []any{"198.51.100.200-198.51.100.219"}, "autoAssign": true},
		"status": map[string]any{
			"families": []any{map[string]any{"family": "IPv4", "size": int64(20), "used": int64(0), "free": int64(20)}},
			"orphaned": int64(0),
		},
	}}
}

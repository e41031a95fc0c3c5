package manifests

import (
	"context"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/agent"
	"github.com/groundcloud/groundcloud/internal/lbapi"
	"github.com/groundcloud/groundcloud/test/framework/controlplane"
)

// policyMessage is what the admission policy of deploy/ answers a refused
// write with.
const policyMessage = "only the groundcloud controller manager writes LoadBalancer specs"

// TestOnlyTheControllerManagerWritesLoadBalancerSpecs applies deploy/ to a
// real apiserver and shows its ValidatingAdmissionPolicy at work: a user
// whom RBAC lets write loadbalancers (and a cluster admin) is refused
// creating one and changing its spec, but may change its metadata; the
// controller manager's ServiceAccount creates and changes specs; the
// agent's ServiceAccount still writes status.
func TestOnlyTheControllerManagerWritesLoadBalancerSpecs(t *testing.T) {
	objs := renderDeploy(t)
	cp := controlplane.StartT(t, controlplane.Options{Users: []controlplane.User{{Name: "editor"}}})
	ctx := t.Context()
	if err := applyAll(t, cp, objs); err != nil {
		t.Fatal(err)
	}
	grantLoadBalancerWrites(t, cp, "editor")

	editorCfg, err := cp.RESTConfigFor("editor")
	if err != nil {
		t.Fatal(err)
	}
	editor := lbClient(t, editorCfg)
	admin := lbClient(t, cp.RESTConfig())
	ccm := lbClient(t, serviceAccountConfig(t, cp, "groundcloud-controller-manager"))
	agentSA := lbClient(t, serviceAccountConfig(t, cp, "groundcloud-agent"))

	// The policy takes effect once the apiserver has loaded it (and the
	// CRD is served): until then a probe is admitted, and deleted.
	waitFor(t, "the admission policy to refuse the editor", 60*time.Second, func() (bool, error) {
		lb, err := editor.Create(ctx, specimen("probe"))
		if err == nil {
			_ = admin.Delete(ctx, lb.Namespace, lb.Name, metav1.DeleteOptions{})
			return false, nil
		}
		return refused(err), nil
	})

	t.Run("a user with write access to loadbalancers cannot create one", func(t *testing.T) {
		_, err := editor.Create(ctx, specimen("by-editor"))
		if !refused(err) {
			t.Fatalf("create by editor: %v, want refused by the policy", err)
		}
		t.Logf("create by editor: %v", err)
	})
	t.Run("nor can a cluster admin", func(t *testing.T) {
		if _, err := admin.Create(ctx, specimen("by-admin")); !refused(err) {
			t.Fatalf("create by admin: %v, want refused by the policy", err)
		}
	})

	var lb *v1alpha1.LoadBalancer
	t.Run("the controller manager creates and changes specs", func(t *testing.T) {
		if lb, err = ccm.Create(ctx, specimen("web")); err != nil {
			t.Fatalf("create by the controller manager: %v", err)
		}
		lb.Spec.Ports[0].NodePort = 30081
		if lb, err = ccm.Update(ctx, lb); err != nil {
			t.Fatalf("update by the controller manager: %v", err)
		}
	})
	if lb == nil {
		t.FailNow()
	}

	t.Run("the user cannot change the spec, only metadata", func(t *testing.T) {
		changed := lb.DeepCopy()
		changed.Spec.Addresses = []string{"198.51.100.66"}
		if _, err := editor.Update(ctx, changed); !refused(err) {
			t.Errorf("spec update by editor: %v, want refused by the policy", err)
		}
		labelled := lb.DeepCopy()
		labelled.Labels = map[string]string{"team": "web"}
		if _, err := editor.Update(ctx, labelled); err != nil {
			t.Errorf("label update by editor: %v, want allowed", err)
		}
	})

	t.Run("the agent writes status", func(t *testing.T) {
		st := map[string]any{"hosts": []any{map[string]any{
			"name": "lb-1",
			"conditions": []any{map[string]any{
				"type": "Programmed", "status": "True", "reason": "Synced", "message": "data plane programmed",
				"lastTransitionTime": time.Now().UTC().Format(time.RFC3339), "observedGeneration": lb.Generation,
			}},
		}}}
		if err := agentSA.ApplyStatus(ctx, "default", "web", agent.FieldManager("lb-1"), st); err != nil {
			t.Fatalf("status apply by the agent: %v", err)
		}
		got, err := admin.Get(ctx, "default", "web")
		if err != nil || len(got.Status.Hosts) != 1 {
			t.Fatalf("status after the agent's apply: %+v, %v", got, err)
		}
	})
}

// specimen is a LoadBalancer as the controller manager writes one.
func specimen(name string) *v1alpha1.LoadBalancer {
	return &v1alpha1.LoadBalancer{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: v1alpha1.LoadBalancerSpec{
			Addresses:             []string{"198.51.100.200"},
			Ports:                 []v1alpha1.Port{{Name: "http", Protocol: "TCP", Port: 80, NodePort: 30080}},
			ExternalTrafficPolicy: "Cluster",
			SessionAffinity:       "None",
		},
	}
}

// refused reports whether err is the policy's refusal.
func refused(err error) bool {
	return err != nil && strings.Contains(err.Error(), policyMessage)
}

func lbClient(t *testing.T, cfg *rest.Config) *lbapi.Client {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return lbapi.NewClient(dyn)
}

// serviceAccountConfig is a client config with a token of a
// ServiceAccount of deploy/ in kube-system.
func serviceAccountConfig(t *testing.T, cp *controlplane.ControlPlane, name string) *rest.Config {
	t.Helper()
	path, err := cp.ServiceAccountKubeconfig(t.Context(), "kube-system", name)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// grantLoadBalancerWrites lets user do everything RBAC allows on
// LoadBalancers, status included.
func grantLoadBalancerWrites(t *testing.T, cp *controlplane.ControlPlane, user string) {
	t.Helper()
	ctx := context.Background()
	rbac := cp.Client().RbacV1()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "loadbalancer-editor"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"groundcloud.io"}, Resources: []string{"loadbalancers", "loadbalancers/status"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"},
		}},
	}
	if _, err := rbac.ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "loadbalancer-editor"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

package apionly

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/groundcloud/groundcloud/test/framework/controlplane"
	"github.com/groundcloud/groundcloud/test/framework/manifests"
)

// The components' ServiceAccounts, as deploy/ defines them.
const (
	identityNamespace     = "kube-system"
	controllerManagerUser = "groundcloud-controller-manager"
	agentUser             = "groundcloud-agent"
)

// rbacKinds are the objects of deploy/ that give the components their
// identities and permissions.
var rbacKinds = []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}

// applyRBAC applies the ServiceAccounts and RBAC objects of deploy/ as an
// administrator would when installing groundcloud.
func (e *Env) applyRBAC(ctx context.Context) error {
	repo, err := controlplane.RepoRoot()
	if err != nil {
		return err
	}
	objs, err := manifests.Render(ctx, filepath.Join(e.Opts.ToolsDir, "kubectl"), filepath.Join(repo, "deploy"))
	if err != nil {
		return err
	}
	objs = slices.DeleteFunc(objs, func(o *unstructured.Unstructured) bool { return !slices.Contains(rbacKinds, o.GetKind()) })
	if err := manifests.ApplyWithConfig(ctx, e.CP.RESTConfig(), objs, "groundcloud-sandbox"); err != nil {
		return fmt.Errorf("apply deploy/ RBAC: %w", err)
	}
	e.logf("applied %d ServiceAccount and RBAC objects of deploy/", len(objs))
	return nil
}

// kubeconfig returns the kubeconfig a component runs with: a token of its
// own ServiceAccount bound by deploy/'s RBAC, or with AdminIdentity a test
// user in system:masters.
func (e *Env) kubeconfig(ctx context.Context, user string) (string, error) {
	if e.Opts.AdminIdentity {
		return e.CP.Kubeconfig(user)
	}
	return e.CP.ServiceAccountKubeconfig(ctx, identityNamespace, user)
}

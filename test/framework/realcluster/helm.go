package realcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/groundcloud/groundcloud/test/framework/controlplane"
	"github.com/groundcloud/groundcloud/test/framework/manifests"
)

// helmReleaseName is the Helm release of groundcloud (Options.Helm), in
// kube-system as docs/install.md installs it.
const helmReleaseName = "groundcloud"

// helm is the pinned helm, with a home of the cluster's own.
func (c *Cluster) helm(ctx context.Context) (manifests.Helm, error) {
	bin, err := controlplane.ModuleTool(ctx, controlplane.ToolHelm)
	if err != nil {
		return manifests.Helm{}, err
	}
	return manifests.Helm{Bin: bin, Home: filepath.Join(c.Opts.Dir, "helm")}, nil
}

// helmRelease writes the values (install/values.yaml in Dir) a user of this
// network would give the chart of Opts.Repo, for c.Images, and returns the
// release and the chart. The keys are ones every chart version the test
// bed installs knows (the chart refuses unknown ones).
func (c *Cluster) helmRelease() (manifests.Release, string, error) {
	image := func(ref string) map[string]any {
		repo, tag, _ := strings.Cut(ref, ":")
		return map[string]any{"repository": repo, "tag": tag, "pullPolicy": "Never"}
	}
	cm := map[string]any{
		"image":     image(c.Images.ControllerManager.Ref),
		"extraArgs": []string{"--cluster-cidr=" + c.Opts.ClusterCIDR},
	}
	if c.Opts.BMCCredentials != nil {
		cm["bmcCredentials"] = map[string]any{"secretName": "groundcloud-bmc-credentials"}
	}
	values := map[string]any{
		"controllerManager": cm,
		"agent":             map[string]any{"image": image(c.Images.Agent.Ref), "interface": c.Nodes[0].Host.Iface},
		"router":            map[string]any{"enabled": true, "image": image(c.Images.Router.Ref)},
	}
	out, err := yaml.Marshal(values)
	if err != nil {
		return manifests.Release{}, "", err
	}
	dir := filepath.Join(c.Opts.Dir, "install")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return manifests.Release{}, "", err
	}
	file := filepath.Join(dir, "values.yaml")
	if err := os.WriteFile(file, out, 0o644); err != nil {
		return manifests.Release{}, "", err
	}
	rel := manifests.Release{Name: helmReleaseName, Namespace: metav1.NamespaceSystem, ValuesFiles: []string{file}}
	return rel, filepath.Join(c.Opts.Repo, "charts", "groundcloud"), nil
}

// renderChart renders the release as `helm upgrade --install` would
// install it (helm template).
func (c *Cluster) renderChart(ctx context.Context) ([]*unstructured.Unstructured, error) {
	h, err := c.helm(ctx)
	if err != nil {
		return nil, err
	}
	rel, chart, err := c.helmRelease()
	if err != nil {
		return nil, err
	}
	return h.Render(ctx, chart, rel)
}

// helmUpgrade installs or upgrades the release: helm upgrade --install.
func (c *Cluster) helmUpgrade(ctx context.Context) error {
	h, err := c.helm(ctx)
	if err != nil {
		return err
	}
	rel, chart, err := c.helmRelease()
	if err != nil {
		return err
	}
	if out, err := h.Install(ctx, c.CP.AdminKubeconfig, chart, rel); err != nil {
		return fmt.Errorf("%w\n%s", err, out)
	}
	return nil
}

// Rollback rolls the Helm release (Options.Helm) back to its previous
// revision, `helm rollback groundcloud`, which installed r, and waits for
// the rollouts, as Install does.
func (c *Cluster) Rollback(ctx context.Context, r Release) error {
	if !c.Opts.Helm {
		return fmt.Errorf("rollback: groundcloud was not installed with helm")
	}
	h, err := c.helm(ctx)
	if err != nil {
		return err
	}
	return c.installRelease(ctx, r, func(ctx context.Context, _ []*unstructured.Unstructured) error {
		out, err := h.Run(ctx, "rollback", helmReleaseName, "--namespace", metav1.NamespaceSystem, "--kubeconfig", c.CP.AdminKubeconfig)
		if err != nil {
			return fmt.Errorf("%w\n%s", err, out)
		}
		return nil
	})
}

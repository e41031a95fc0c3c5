package realcluster

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/groundcloud/groundcloud/test/framework/manifests"
)

// installFieldManager is the field manager of what the test bed installs.
const installFieldManager = "groundcloud-test-bed"

// agentDaemonSet is the agents' DaemonSet in kube-system (deploy/).
const agentDaemonSet = "groundcloud-agent"

// install installs kube-proxy and cluster DNS, then groundcloud as docs/install.md says:
// the cloud-config and gossip-key Secrets, then deploy/ and deploy/router/
// through a kustomize overlay of the test bed's (install/ in Dir) that
// only points the images at the local ones and sets what a user sets for
// this network.
func (c *Cluster) install(ctx context.Context) error {
	if err := c.installKubeProxy(ctx); err != nil {
		return err
	}
	if err := c.installCoreDNS(ctx); err != nil {
		return err
	}
	c.CloudConfig = c.cloudConfig()
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	secrets := map[string]map[string][]byte{
		"groundcloud-cloud-config": {"cloud.conf": []byte(c.CloudConfig)},
		"groundcloud-gossip-key":   {"key": []byte(base64.StdEncoding.EncodeToString(key))},
	}
	if c.Opts.BMCCredentials != nil {
		secrets["groundcloud-bmc-credentials"] = c.Opts.BMCCredentials
	}
	for name, data := range secrets {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem}, Data: data}
		if _, err := c.Client.CoreV1().Secrets(metav1.NamespaceSystem).Create(ctx, s, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create secret %s: %w", name, err)
		}
	}
	objs, err := c.renderInstall(ctx)
	if err != nil {
		return err
	}
	if err := c.apply(ctx, objs); err != nil {
		return fmt.Errorf("install groundcloud: %w", err)
	}
	c.logf("installed groundcloud from %s (%d objects)", c.installedFrom(), len(objs))
	return nil
}

// installedFrom says what install and Install apply.
func (c *Cluster) installedFrom() string {
	if c.Opts.Helm {
		return filepath.Join(c.Opts.Repo, "charts", "groundcloud") + " with helm"
	}
	return filepath.Join(c.Opts.Repo, "deploy") + " and deploy/router/"
}

// apply installs or upgrades to objs (renderInstall's): kubectl apply, or
// helm upgrade --install with the same values (Options.Helm).
func (c *Cluster) apply(ctx context.Context, objs []*unstructured.Unstructured) error {
	if c.Opts.Helm {
		return c.helmUpgrade(ctx)
	}
	return manifests.ApplyWithConfig(ctx, c.CP.RESTConfig(), objs, installFieldManager)
}

// renderInstall writes the overlay (install/ in Dir) over Opts.Repo's
// deploy/ with the images of c.Images and renders it, as kubectl kustomize
// does, or with Options.Helm renders the chart with the values that say
// the same (helm template); it records the key that places the agents
// (hostLabel).
func (c *Cluster) renderInstall(ctx context.Context) ([]*unstructured.Unstructured, error) {
	if c.Opts.Helm {
		objs, err := c.renderChart(ctx)
		if err != nil {
			return nil, err
		}
		if c.hostLabel, err = agentHostLabel(objs); err != nil {
			return nil, fmt.Errorf("%s: %w", c.Opts.Repo, err)
		}
		return objs, nil
	}
	dir := filepath.Join(c.Opts.Dir, "install")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	overlay, err := c.overlay(dir)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o644); err != nil {
		return nil, err
	}
	objs, err := manifests.Render(ctx, filepath.Join(c.Opts.ToolsDir, "kubectl"), dir)
	if err != nil {
		return nil, err
	}
	if c.hostLabel, err = agentHostLabel(objs); err != nil {
		return nil, fmt.Errorf("%s: %w", c.Opts.Repo, err)
	}
	return objs, nil
}

// labelLoadBalancerHost labels a registered load-balancer host's Node as
// docs/install.md has an administrator do (kubectl label node): the key is
// the one the installed release's agents select (hostLabel): for this
// version annotation.LoadBalancerHostLabel, one its kubelet may not set.
func (c *Cluster) labelLoadBalancerHost(ctx context.Context, name string) error {
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"true"}}}`, c.hostLabel)
	if _, err := c.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("label load-balancer host %s: %w", name, err)
	}
	return nil
}

// overlay is the test bed's kustomization over deploy/ and deploy/router/:
// local images that are never pulled, the interface facing clients (the
// lab's eth0), and the controller manager's --cluster-cidr for pod routes
// (the cloud-config has a [Routes] section).
// Kustomize takes bases by relative path only: dir is where the overlay
// goes.
func (c *Cluster) overlay(dir string) (string, error) {
	deploy, err := filepath.Rel(dir, filepath.Join(c.Opts.Repo, "deploy"))
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %s
  - %s
`, deploy, filepath.Join(deploy, "router"))
	if c.Opts.BMCCredentials != nil {
		fmt.Fprintf(&b, "components:\n  - %s\n", filepath.Join(deploy, "controller-manager", "bmc-credentials"))
	}
	b.WriteString("images:\n")
	for _, img := range []struct{ name, ref string }{
		{"groundcloud-controller-manager", c.Images.ControllerManager.Ref},
		{"groundcloud-agent", c.Images.Agent.Ref},
		{"groundcloud-router", c.Images.Router.Ref},
	} {
		name := img.name
		repo, tag, _ := strings.Cut(img.ref, ":")
		fmt.Fprintf(&b, "  - name: ghcr.io/groundcloud/%s\n    newName: %s\n    newTag: %q\n", name, repo, tag)
	}
	fmt.Fprintf(&b, `patches:
  - patch: |
      apiVersion: apps/v1
      kind: DaemonSet
      metadata:
        name: groundcloud-agent
        namespace: kube-system
      spec:
        template:
          spec:
            containers:
              - name: agent
                imagePullPolicy: Never
                env:
                  - name: GROUNDCLOUD_INTERFACE
                    value: %s
  - patch: |
      apiVersion: apps/v1
      kind: DaemonSet
      metadata:
        name: groundcloud-router
        namespace: kube-system
      spec:
        template:
          spec:
            containers:
              - name: router
                imagePullPolicy: Never
  - patch: |
      apiVersion: apps/v1
      kind: Deployment
      metadata:
        name: groundcloud-controller-manager
        namespace: kube-system
      spec:
        template:
          spec:
            containers:
              - name: controller-manager
                imagePullPolicy: Never
  - target:
      kind: Deployment
      name: groundcloud-controller-manager
    patch: |
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --cluster-cidr=%s
`, c.Nodes[0].Host.Iface, c.Opts.ClusterCIDR)
	return b.String(), nil
}

// cloudConfig is the controller manager's cloud-config: every node (the
// late workers too) as a machine with its lab addresses, pool "default",
// and pod routes.
func (c *Cluster) cloudConfig() string {
	var b strings.Builder
	b.WriteString("[Global]\nregion = lab\n\n")
	for _, n := range slices.Concat(c.Nodes, c.late) {
		fmt.Fprintf(&b, "[Machine %q]\nzone = rack-1\ninstance-type = netns\n", n.Name)
		for _, a := range c.nodeAddrs(n.Host) {
			fmt.Fprintf(&b, "internal-ip = %s\n", a)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "[Pool \"default\"]\naddresses = %s\naddresses = %s\n", c.Opts.Pool4, c.Opts.Pool6)
	if p := strings.TrimSpace(c.Opts.DefaultPool); p != "" {
		b.WriteString(p + "\n")
	}
	b.WriteString("\n[Routes]\n\n")
	b.WriteString(c.Opts.ExtraCloudConfig)
	if c.Opts.CloudConfigFor != nil {
		b.WriteString(c.Opts.CloudConfigFor(c))
	}
	return b.String()
}

// SetCloudConfig replaces the cloud-config (the Secret's file, and
// CloudConfig with it) and restarts the agents, which read it only at
// start, as `kubectl rollout restart` does; it returns once the agent
// DaemonSet has rolled out. The controller manager applies the change on
// its own.
func (c *Cluster) SetCloudConfig(ctx context.Context, conf string) error {
	secrets := c.Client.CoreV1().Secrets(metav1.NamespaceSystem)
	s, err := secrets.Get(ctx, "groundcloud-cloud-config", metav1.GetOptions{})
	if err != nil {
		return err
	}
	s.Data = map[string][]byte{"cloud.conf": []byte(conf)}
	if _, err := secrets.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update the cloud-config: %w", err)
	}
	c.CloudConfig = conf
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`, time.Now().Format(time.RFC3339Nano))
	if _, err := c.Client.AppsV1().DaemonSets(metav1.NamespaceSystem).Patch(ctx, agentDaemonSet, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("restart the agents: %w", err)
	}
	return c.poll(ctx, "the agents' restart", func(ctx context.Context) (string, error) {
		return c.daemonSetRolledOut(ctx, metav1.NamespaceSystem, agentDaemonSet)
	})
}

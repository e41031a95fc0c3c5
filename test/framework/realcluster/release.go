package realcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/groundcloud/groundcloud/test/framework/imagebuild"
)

// Release is a version of groundcloud as the test bed installs it: a
// checkout's deploy/ and the images built from its deploy/images/
// Dockerfiles. Start installs Options.Repo's; Cluster.Install another's
// over it, as a user upgrades (or downgrades).
type Release struct {
	// Repo is the checkout.
	Repo string
	// ControllerManager, Agent and Router are built from its Dockerfiles.
	ControllerManager, Agent, Router imagebuild.Image
}

func (r Release) images() []imagebuild.Image {
	return []imagebuild.Image{r.ControllerManager, r.Agent, r.Router}
}

// ours are the images built from deploy/images/<name>/Dockerfile.
var ours = []string{"groundcloud-controller-manager", "groundcloud-agent", "groundcloud-router"}

// releaseRecipes reads our Dockerfiles in repo.
func releaseRecipes(repo string) ([]imagebuild.Recipe, error) {
	var recipes []imagebuild.Recipe
	for _, name := range ours {
		r, err := imagebuild.ReadRecipe(filepath.Join(repo, "deploy", "images", name, "Dockerfile"))
		if err != nil {
			return nil, err
		}
		recipes = append(recipes, r)
	}
	return recipes, nil
}

// releaseImages makes the images of recipes (releaseRecipes) from the
// binaries their go builds wrote, in the same order.
func releaseImages(ctx context.Context, b imagebuild.Builder, recipes []imagebuild.Recipe, bins []string) (Release, error) {
	r := Release{Repo: b.Repo}
	for i, img := range []*imagebuild.Image{&r.ControllerManager, &r.Agent, &r.Router} {
		var err error
		if *img, err = b.FromRecipe(ctx, imagePrefix+ours[i], recipes[i], bins[i]); err != nil {
			return Release{}, fmt.Errorf("image %s: %w", ours[i], err)
		}
	}
	return r, nil
}

// BuildRelease builds the images of the checkout repo into dir, with its
// own Dockerfiles and go.mod.
func BuildRelease(ctx context.Context, repo, dir string) (Release, error) {
	recipes, err := releaseRecipes(repo)
	if err != nil {
		return Release{}, err
	}
	var builds []imagebuild.GoBuild
	for _, r := range recipes {
		builds = append(builds, r.Build)
	}
	b := imagebuild.Builder{Dir: dir, Repo: repo}
	bins, err := b.Compile(ctx, builds...)
	if err != nil {
		return Release{}, fmt.Errorf("build release %s: %w", repo, err)
	}
	return releaseImages(ctx, b, recipes, bins)
}

// ExportCommit writes the tree of commit, of the git repository at repo,
// into dir (which must not exist yet): an earlier release to install.
// A shallow clone may lack the commit: the error says so.
func ExportCommit(ctx context.Context, repo, commit, dir string) error {
	if out, err := catCommit(ctx, repo, commit); err != nil {
		return fmt.Errorf("commit %s is not in the clone at %s (a shallow clone? git fetch --unshallow): %w: %s", commit, repo, err, strings.TrimSpace(string(out)))
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "sh", "-c", `git -C "$1" archive --format=tar "$2" | tar -x -C "$3"`, "sh", repo, commit, dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("export %s: %w: %s", commit, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// The previous release: what the upgrade and downgrade lane (test/cluster
// TestUpgrade) and the upgrade benchmark (test/bench
// TestUpgradeBenchmark) upgrade from and downgrade to, named here only.
const (
	// PreviousRelease is the parent of c40c632 ("agent placement: a label
	// kubelets cannot set"), the last commit whose agents run on
	// PreviousHostLabel. Move it when a release changes the LoadBalancer
	// schema, flags or placement again (or to a release tag once there are
	// releases).
	PreviousRelease = "ec050137503c151bf6f372da0123f232a6f9c247"
	// PreviousHostLabel places PreviousRelease's agents.
	PreviousHostLabel = "groundcloud.io/load-balancer"
)

// PreviousReleaseTree writes PreviousRelease's tree from the clone at repo
// into dir (ExportCommit). Unless insist, a clone without it (a tarball,
// a shallow clone) is a reason to skip, returned as skip, not an error.
func PreviousReleaseTree(ctx context.Context, repo, dir string, insist bool) (skip string, err error) {
	if !insist && !HasCommit(ctx, repo, PreviousRelease) {
		return fmt.Sprintf("needs commit %s (realcluster.PreviousRelease) in the clone at %s: git fetch --unshallow", PreviousRelease, repo), nil
	}
	return "", ExportCommit(ctx, repo, PreviousRelease, dir)
}

// HasCommit reports whether the git clone at repo holds commit.
func HasCommit(ctx context.Context, repo, commit string) bool {
	_, err := catCommit(ctx, repo, commit)
	return err == nil
}

func catCommit(ctx context.Context, repo, commit string) ([]byte, error) {
	return exec.CommandContext(ctx, "git", "-C", repo, "cat-file", "-e", commit+"^{commit}").CombinedOutput()
}

// Install installs r over what runs, as docs/install.md has a user
// upgrade: r's images on every node (as a registry would serve them), the
// load-balancer hosts labelled with the key r's agent DaemonSet selects
// (before it selects it), then r's deploy/ and deploy/router/ applied
// through the test bed's overlay (kubectl apply -k), or with Options.Helm
// r's chart (helm upgrade). It returns once every Deployment and DaemonSet
// of r has rolled out and every component runs. It removes no label and,
// with kubectl, no object r lacks (apply -k without --prune does
// neither): RemoveHostLabel is the user's last step.
func (c *Cluster) Install(ctx context.Context, r Release) error {
	return c.installRelease(ctx, r, c.apply)
}

// installRelease installs r with apply, given what r renders to.
func (c *Cluster) installRelease(ctx context.Context, r Release, apply func(context.Context, []*unstructured.Unstructured) error) error {
	if err := c.importEverywhere(ctx, r.images()); err != nil {
		return err
	}
	c.Images.ControllerManager, c.Images.Agent, c.Images.Router = r.ControllerManager, r.Agent, r.Router
	c.Opts.Repo = r.Repo
	objs, err := c.renderInstall(ctx)
	if err != nil {
		return err
	}
	for _, n := range c.Nodes {
		if n.LoadBalancer {
			if err := c.labelLoadBalancerHost(ctx, n.Name); err != nil {
				return err
			}
		}
	}
	if err := apply(ctx, objs); err != nil {
		return fmt.Errorf("install %s: %w", r.Repo, err)
	}
	c.logf("installed groundcloud from %s (%d objects); waiting for the rollouts", c.installedFrom(), len(objs))
	if err := c.poll(ctx, "rollouts of "+r.Repo, func(ctx context.Context) (string, error) { return c.rolledOut(ctx, objs) }); err != nil {
		return err
	}
	return c.poll(ctx, "components running", c.componentsReady)
}

// RemoveHostLabel removes label key from every Node that has it
// (kubectl label nodes -l key key-).
func (c *Cluster) RemoveHostLabel(ctx context.Context, key string) error {
	nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: key})
	if err != nil {
		return err
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, key)
	for _, n := range nodes.Items {
		if _, err := c.Client.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("remove label %s of %s: %w", key, n.Name, err)
		}
	}
	return nil
}

// HostLabel is the label key that places the installed release's agents
// (its DaemonSet's nodeSelector).
func (c *Cluster) HostLabel() string { return c.hostLabel }

// importEverywhere imports imgs into every node's containerd at once.
func (c *Cluster) importEverywhere(ctx context.Context, imgs []imagebuild.Image) error {
	var wg sync.WaitGroup
	errs := make([]error, len(c.Nodes))
	for i, n := range c.Nodes {
		wg.Go(func() { errs[i] = n.importImages(ctx, imgs) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// agentHostLabel is the key of the agent DaemonSet's nodeSelector that
// marks load-balancer hosts: the one besides kubernetes.io/os, with the
// value "true".
func agentHostLabel(objs []*unstructured.Unstructured) (string, error) {
	for _, o := range objs {
		if o.GetKind() != "DaemonSet" || o.GetName() != "groundcloud-agent" {
			continue
		}
		sel, _, err := unstructured.NestedStringMap(o.Object, "spec", "template", "spec", "nodeSelector")
		if err != nil {
			return "", fmt.Errorf("DaemonSet groundcloud-agent: %w", err)
		}
		for k, v := range sel {
			if k != "kubernetes.io/os" && v == "true" {
				return k, nil
			}
		}
		return "", fmt.Errorf("DaemonSet groundcloud-agent: no host label in its nodeSelector %v", sel)
	}
	return "", errors.New("no DaemonSet groundcloud-agent")
}

// rolledOut reports the Deployments and DaemonSets of objs whose latest
// spec has not rolled out to every Pod yet.
func (c *Cluster) rolledOut(ctx context.Context, objs []*unstructured.Unstructured) (string, error) {
	var missing []string
	for _, o := range objs {
		var why string
		var err error
		switch o.GetKind() {
		case "DaemonSet":
			why, err = c.daemonSetRolledOut(ctx, o.GetNamespace(), o.GetName())
		case "Deployment":
			why, err = c.deploymentRolledOut(ctx, o.GetNamespace(), o.GetName())
		}
		if err != nil {
			return "", err
		}
		if why != "" {
			missing = append(missing, why)
		}
	}
	return strings.Join(missing, "; "), nil
}

func (c *Cluster) daemonSetRolledOut(ctx context.Context, ns, name string) (string, error) {
	ds, err := c.Client.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	s := ds.Status
	if s.ObservedGeneration < ds.Generation || s.UpdatedNumberScheduled != s.DesiredNumberScheduled || s.NumberAvailable != s.DesiredNumberScheduled {
		return fmt.Sprintf("DaemonSet %s: %d of %d updated, %d available", name, s.UpdatedNumberScheduled, s.DesiredNumberScheduled, s.NumberAvailable), nil
	}
	return "", nil
}

func (c *Cluster) deploymentRolledOut(ctx context.Context, ns, name string) (string, error) {
	d, err := c.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	s, want := d.Status, int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	if s.ObservedGeneration < d.Generation || s.UpdatedReplicas != want || s.Replicas != want || s.AvailableReplicas != want {
		return fmt.Sprintf("Deployment %s: %d of %d updated, %d in all, %d available", name, s.UpdatedReplicas, want, s.Replicas, s.AvailableReplicas), nil
	}
	return "", nil
}

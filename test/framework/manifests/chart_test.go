package manifests

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/groundcloud/groundcloud/test/framework/controlplane"
)

// The release the chart tests render: the chart's own namespace for
// deploy/'s, and another.
const (
	releaseName     = "groundcloud"
	otherNamespace  = "groundcloud-system"
	customValuesRel = "testdata/chart-values.yaml"
	// deployBGPPasswords is an overlay of deploy/ with the component that
	// mounts the BGP passwords, as a user's would be.
	deployBGPPasswords = "test/framework/manifests/testdata/deploy-bgp-passwords"
	// deployBMCCredentials is an overlay of deploy/ with the component
	// that mounts the BMCs' credentials in the controller manager.
	deployBMCCredentials = "test/framework/manifests/testdata/deploy-bmc-credentials"
)

// helmLabels are the labels the chart adds to every templated object's
// metadata beyond deploy/'s.
var helmLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/version"}

// newHelm returns the pinned helm (built once by hack/tools/build-module.sh)
// with a home of its own. Skipped with -short: the tool may need building.
func newHelm(t *testing.T) Helm {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the pinned helm; skipped with -short")
	}
	bin, err := controlplane.ModuleTool(t.Context(), controlplane.ToolHelm)
	if err != nil {
		t.Fatalf("helm: %v", err)
	}
	return Helm{Bin: bin, Home: t.TempDir()}
}

// chartDir is charts/groundcloud.
func chartDir(t *testing.T) string {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "charts", "groundcloud")
}

func customValues(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(customValuesRel)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// renderChart renders the chart as release groundcloud in namespace ns.
func renderChart(t *testing.T, h Helm, ns string, valuesFiles []string, set ...string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := h.Render(t.Context(), chartDir(t), Release{Name: releaseName, Namespace: ns, ValuesFiles: valuesFiles, Set: set})
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// TestChartLint: helm lint --strict passes with the default values and with
// values different from every default, and values.schema.json refuses a
// misspelt value.
func TestChartLint(t *testing.T) {
	h := newHelm(t)
	chart := chartDir(t)
	for name, args := range map[string][]string{
		"defaults":      nil,
		"custom values": {"--values", customValues(t)},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := h.Run(t.Context(), append([]string{"lint", "--strict", chart}, args...)...)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
		})
	}
	for set, want := range map[string]string{
		"agent.interfaces=eth1":              "interfaces",
		"controllerManager.replicas=0":       "replicas",
		"agent.extraArgs[0]=gossip-seeds=x":  "extraArgs",
		"monitoring.dashboard.enabled=maybe": "enabled",
	} {
		out, err := h.Run(t.Context(), "lint", "--strict", chart, "--set", set)
		if err == nil || !strings.Contains(err.Error()+string(out), want) {
			t.Errorf("helm lint --set %s: got %v\n%s\nwant an error naming %s", set, err, out, want)
		}
	}
}

// TestChartMatchesDeploy: with its default values in kube-system the chart
// renders exactly the objects of `kubectl apply -k deploy/`, with
// router.enabled those and deploy/router/'s, and with
// agent.bgpPasswords.secretName those of deploy/ with the component
// deploy/agent/bgp-passwords/, but for Helm's own labels. A change to
// deploy/ that the chart lacks (or the reverse) fails here.
func TestChartMatchesDeploy(t *testing.T) {
	h := newHelm(t)
	tests := []struct {
		name   string
		deploy func(*testing.T) []*unstructured.Unstructured
		set    []string
	}{
		{name: "deploy/", deploy: renderDeploy},
		{name: "deploy/ and deploy/router/", deploy: renderAll, set: []string{"router.enabled=true"}},
		{
			name:   "deploy/ with agent/bgp-passwords",
			deploy: func(t *testing.T) []*unstructured.Unstructured { return renderKustomization(t, deployBGPPasswords) },
			set:    []string{"agent.bgpPasswords.secretName=groundcloud-bgp-passwords"},
		},
		{
			name:   "deploy/ with controller-manager/bmc-credentials",
			deploy: func(t *testing.T) []*unstructured.Unstructured { return renderKustomization(t, deployBMCCredentials) },
			set:    []string{"controllerManager.bmcCredentials.secretName=groundcloud-bmc-credentials"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := byKey(tt.deploy(t))
			got := byKey(renderChart(t, h, "kube-system", nil, tt.set...))
			keys := slices.Sorted(maps.Keys(want))
			for k := range got {
				if _, ok := want[k]; !ok {
					keys = append(keys, k)
				}
			}
			for _, k := range keys {
				w, inDeploy := want[k]
				g, inChart := got[k]
				switch {
				case !inChart:
					t.Errorf("%s: in %s, not in the chart", k, tt.name)
				case !inDeploy:
					t.Errorf("%s: in the chart, not in %s", k, tt.name)
				default:
					if diff := cmp.Diff(w, g); diff != "" {
						t.Errorf("%s (-%s +chart):\n%s", k, tt.name, diff)
					}
				}
			}
		})
	}
}

// byKey maps "Kind namespace/name" to each object without Helm's labels.
// Helm never templates crds/, so CRDs lack deploy/'s labels too.
func byKey(objs []*unstructured.Unstructured) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, o := range objs {
		o = o.DeepCopy()
		labels := o.GetLabels()
		for _, l := range helmLabels {
			delete(labels, l)
		}
		if o.GetKind() == "CustomResourceDefinition" {
			labels = nil
		}
		if len(labels) == 0 {
			unstructured.RemoveNestedField(o.Object, "metadata", "labels")
		} else {
			o.SetLabels(labels)
		}
		out[o.GetKind()+" "+key(o)] = o.Object
	}
	return out
}

// TestChartObjects: what each set of values renders.
func TestChartObjects(t *testing.T) {
	h := newHelm(t)
	tests := []struct {
		name, namespace string
		values          []string
		want            []string
	}{
		{
			name: "defaults", namespace: "kube-system",
			want: slices.Sorted(maps.Keys(byKey(renderDeploy(t)))),
		},
		{
			name: "custom values", namespace: otherNamespace, values: []string{customValues(t)},
			want: []string{
				"ClusterRole groundcloud-agent",
				"ClusterRole groundcloud-controller-manager",
				"ClusterRole groundcloud-router",
				"ClusterRoleBinding groundcloud-agent",
				"ClusterRoleBinding groundcloud-controller-manager",
				"ClusterRoleBinding groundcloud-router",
				"ConfigMap groundcloud-system/groundcloud-dashboard",
				"CustomResourceDefinition addresspools.groundcloud.io",
				"CustomResourceDefinition loadbalancers.groundcloud.io",
				"CustomResourceDefinition routes.groundcloud.io",
				"DaemonSet groundcloud-system/groundcloud-agent",
				"DaemonSet groundcloud-system/groundcloud-router",
				"Deployment groundcloud-system/groundcloud-controller-manager",
				"PodDisruptionBudget groundcloud-system/groundcloud-controller-manager",
				"PrometheusRule groundcloud-system/groundcloud",
				// Beside the Lease and the authentication ConfigMap, in
				// kube-system whatever the release's namespace.
				"Role kube-system/groundcloud-controller-manager",
				"RoleBinding kube-system/groundcloud-controller-manager",
				"Secret groundcloud-system/lab-cloud-config",
				"ServiceAccount groundcloud-system/groundcloud-agent",
				"ServiceAccount groundcloud-system/groundcloud-controller-manager",
				"ServiceAccount groundcloud-system/groundcloud-router",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := slices.Sorted(maps.Keys(byKey(renderChart(t, h, tt.namespace, tt.values))))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("rendered objects (-want +got):\n%s", diff)
			}
		})
	}
}

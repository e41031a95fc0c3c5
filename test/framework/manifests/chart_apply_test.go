package manifests

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/groundcloud/groundcloud/test/framework/controlplane"
)

// monitoringGroup is prometheus-operator's API group. The test apiserver
// does not serve it (its CRDs are not ours to install); objects of it are
// checked with Prometheus' own rule parser instead of applied.
const monitoringGroup = "monitoring.coreos.com"

// TestChartAppliesStrictly applies the chart, rendered with the default
// values and with values different from every default, to a real
// apiserver by server-side apply with fieldValidation=Strict.
func TestChartAppliesStrictly(t *testing.T) {
	h := newHelm(t)
	defaults := renderChart(t, h, "kube-system", nil)
	custom := renderChart(t, h, otherNamespace, []string{customValues(t)})
	cp := controlplane.StartT(t, controlplane.Options{Users: []controlplane.User{}})
	if err := applyAll(t, cp, defaults); err != nil {
		t.Fatalf("defaults: %v", err)
	}

	ns := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": otherNamespace},
	}}
	var apply []*unstructured.Unstructured
	var rules []*unstructured.Unstructured
	for _, o := range custom {
		if o.GroupVersionKind().Group == monitoringGroup {
			rules = append(rules, o)
			continue
		}
		apply = append(apply, o)
	}
	if len(rules) != 1 || rules[0].GetKind() != "PrometheusRule" {
		t.Fatalf("objects of %s: %v, want one PrometheusRule", monitoringGroup, rules)
	}
	if err := applyAll(t, cp, append([]*unstructured.Unstructured{ns}, apply...)); err != nil {
		t.Fatalf("custom values: %v", err)
	}
	checkPrometheusRule(t, rules[0])
}

// checkPrometheusRule runs promcheck (Prometheus' rulefmt and PromQL
// parser) on a PrometheusRule's groups, as the operator hands them to
// Prometheus.
func checkPrometheusRule(t *testing.T, rule *unstructured.Unstructured) {
	t.Helper()
	promcheck, err := controlplane.ModuleTool(t.Context(), controlplane.ToolPromcheck)
	if err != nil {
		t.Fatal(err)
	}
	data, err := yaml.Marshal(rule.Object["spec"])
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), promcheck, "-rules", file).CombinedOutput()
	if err != nil {
		t.Errorf("promcheck on the PrometheusRule's groups: %v\n%s", err, out)
	}
}

// TestChartInstallsWithHelm: `helm upgrade --install` as a user runs it,
// against a real apiserver: install with the defaults, upgrade with
// values different from every default (but the PrometheusRule, whose CRD
// this apiserver lacks), uninstall.
func TestChartInstallsWithHelm(t *testing.T) {
	h := newHelm(t)
	cp := controlplane.StartT(t, controlplane.Options{Users: []controlplane.User{}})
	ctx, c := t.Context(), cp.Client()
	release := Release{Name: releaseName, Namespace: "kube-system"}
	if out, err := h.Install(ctx, cp.AdminKubeconfig, chartDir(t), release); err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	d, err := c.AppsV1().Deployments("kube-system").Get(ctx, "groundcloud-controller-manager", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != 2 {
		t.Errorf("installed replicas %d, want 2", *d.Spec.Replicas)
	}
	if _, err := c.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, "groundcloud-loadbalancer-spec", metav1.GetOptions{}); err != nil {
		t.Errorf("admission policy: %v", err)
	}

	release.ValuesFiles = []string{customValues(t)}
	release.Set = []string{"monitoring.prometheusRule.enabled=false"}
	if out, err := h.Install(ctx, cp.AdminKubeconfig, chartDir(t), release); err != nil {
		t.Fatalf("upgrade: %v\n%s", err, out)
	}
	d, err = c.AppsV1().Deployments("kube-system").Get(ctx, "groundcloud-controller-manager", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != 3 || !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--concurrent-service-syncs=7") {
		t.Errorf("upgraded replicas %d, args %q", *d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Args)
	}
	if _, err := c.CoreV1().Secrets("kube-system").Get(ctx, "lab-cloud-config", metav1.GetOptions{}); err != nil {
		t.Errorf("inline cloud-config Secret: %v", err)
	}
	if _, err := c.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, "groundcloud-loadbalancer-spec", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("admission policy after admissionPolicy.enabled=false: %v, want not found", err)
	}

	if out, err := h.Run(ctx, "uninstall", releaseName, "--namespace", "kube-system", "--kubeconfig", cp.AdminKubeconfig); err != nil {
		t.Fatalf("uninstall: %v\n%s", err, out)
	}
	if _, err := c.AppsV1().DaemonSets("kube-system").Get(ctx, "groundcloud-agent", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("agent DaemonSet after uninstall: %v, want not found", err)
	}
}

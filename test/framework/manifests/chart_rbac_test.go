package manifests

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// TestChartRBAC: whatever the values and the namespace, the chart grants
// each component exactly what deploy/ (and deploy/router/) grants it, and
// that passes the allow-list of TestPermissions.
func TestChartRBAC(t *testing.T) {
	h := newHelm(t)
	renders := []struct {
		name, namespace string
		values          []string
		deploy          []*unstructured.Unstructured
		components      []string
	}{
		{"defaults", "kube-system", nil, renderDeploy(t), []string{"groundcloud-agent", "groundcloud-controller-manager"}},
		{"custom values, with the router", otherNamespace, []string{customValues(t)}, renderAll(t), slices.Sorted(maps.Keys(allowed))},
	}
	for _, r := range renders {
		t.Run(r.name, func(t *testing.T) {
			chart := renderChart(t, h, r.namespace, r.values)
			for _, d := range rbacDrift(r.deploy, chart, r.namespace, r.components) {
				t.Error(d)
			}
			for _, sa := range r.components {
				rules, err := Rules(chart, types.NamespacedName{Namespace: r.namespace, Name: sa})
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range permissionProblems(rules, allowed[sa]) {
					t.Errorf("%s: %s", sa, p)
				}
			}
		})
	}
}

// rbacDrift lists every difference between the RBAC of deploy/ (in
// kube-system) and that of a chart rendered in namespace ns: the rules
// bound to the ServiceAccount of each of components, with where they apply
// and which binding and role grant them, and the RBAC objects themselves.
func rbacDrift(deploy, chart []*unstructured.Unstructured, ns string, components []string) []string {
	var drift []string
	for _, sa := range components {
		want, errW := Rules(deploy, types.NamespacedName{Namespace: "kube-system", Name: sa})
		got, errG := Rules(chart, types.NamespacedName{Namespace: ns, Name: sa})
		if err := cmp.Diff(fmt.Sprint(errW), fmt.Sprint(errG)); err != "" {
			drift = append(drift, fmt.Sprintf("%s: errors (-deploy +chart):\n%s", sa, err))
		}
		if diff := cmp.Diff(sortedRules(want), sortedRules(got)); diff != "" {
			drift = append(drift, fmt.Sprintf("%s: rules (-deploy +chart):\n%s", sa, diff))
		}
	}
	if diff := cmp.Diff(rbacBodies(deploy, "kube-system"), rbacBodies(chart, ns)); diff != "" {
		drift = append(drift, fmt.Sprintf("RBAC objects (-deploy +chart):\n%s", diff))
	}
	return drift
}

func sortedRules(rules []Rule) []string {
	var out []string
	for _, r := range rules {
		out = append(out, fmt.Sprintf("%s via %s in %q: %v", r.Role, r.Binding, r.Namespace, r.PolicyRule))
	}
	slices.Sort(out)
	return out
}

// rbacBodies are the roles and bindings among objs, with their rules,
// role references and subjects; the namespace ns of subjects reads "NS".
func rbacBodies(objs []*unstructured.Unstructured, ns string) map[string]string {
	out := map[string]string{}
	for _, o := range objs {
		if o.GroupVersionKind().Group != rbacv1.GroupName {
			continue
		}
		var body any
		switch o.GetKind() {
		case "ClusterRole", "Role":
			body = o.Object["rules"]
		default:
			subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
			for _, s := range subjects {
				if m, ok := s.(map[string]any); ok && m["namespace"] == ns {
					m["namespace"] = "NS"
				}
			}
			body = []any{o.Object["roleRef"], subjects}
		}
		out[o.GetKind()+" "+key(o)] = fmt.Sprint(body)
	}
	return out
}

// TestRBACDriftNoticed: the comparison notices a broader rule, a rule
// granted by another role, and a binding of someone else.
func TestRBACDriftNoticed(t *testing.T) {
	deploy := renderDeploy(t)
	components := []string{"groundcloud-agent", "groundcloud-controller-manager"}
	if d := rbacDrift(deploy, deploy, "kube-system", components); len(d) > 0 {
		t.Fatalf("deploy/ differs from itself: %v", d)
	}
	mutate := func(kind, name string, change func(o *unstructured.Unstructured)) []*unstructured.Unstructured {
		var out []*unstructured.Unstructured
		for _, o := range deploy {
			o = o.DeepCopy()
			if o.GetKind() == kind && o.GetName() == name {
				change(o)
			}
			out = append(out, o)
		}
		return out
	}
	tests := []struct {
		name  string
		chart []*unstructured.Unstructured
		want  string
	}{
		{
			name: "a verb more",
			chart: mutate("ClusterRole", "groundcloud-agent", func(o *unstructured.Unstructured) {
				rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
				rules[0].(map[string]any)["verbs"] = []any{"list", "watch", "get"}
				_ = unstructured.SetNestedSlice(o.Object, rules, "rules")
			}),
			want: "groundcloud-agent: rules",
		},
		{
			name: "the Role in the release's namespace",
			chart: mutate("RoleBinding", "groundcloud-controller-manager", func(o *unstructured.Unstructured) {
				o.SetNamespace("default")
			}),
			want: "groundcloud-controller-manager: errors",
		},
		{
			name: "someone else bound",
			chart: mutate("ClusterRoleBinding", "groundcloud-agent", func(o *unstructured.Unstructured) {
				subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
				subjects = append(subjects, map[string]any{"kind": "Group", "name": "system:nodes", "apiGroup": rbacv1.GroupName})
				_ = unstructured.SetNestedSlice(o.Object, subjects, "subjects")
			}),
			want: "RBAC objects",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := strings.Join(rbacDrift(deploy, tt.chart, "kube-system", components), "\n")
			if !strings.Contains(got, tt.want) {
				t.Errorf("drift %q lacks %q", got, tt.want)
			}
		})
	}
}

// TestChartAdmissionPolicyNamespace: the admission policy allows the
// controller manager of the release's namespace, and only it.
func TestChartAdmissionPolicyNamespace(t *testing.T) {
	h := newHelm(t)
	for _, ns := range []string{"kube-system", otherNamespace} {
		p := object[admissionv1.ValidatingAdmissionPolicy](t, renderChart(t, h, ns, nil), "ValidatingAdmissionPolicy", "groundcloud-loadbalancer-spec")
		want := fmt.Sprintf("request.userInfo.username == 'system:serviceaccount:%s:groundcloud-controller-manager'", ns)
		if len(p.Spec.Variables) != 1 || p.Spec.Variables[0].Expression != want {
			t.Errorf("namespace %s: variables %+v, want %s", ns, p.Spec.Variables, want)
		}
		pools := object[admissionv1.ValidatingAdmissionPolicy](t, renderChart(t, h, ns, nil), "ValidatingAdmissionPolicy", "groundcloud-addresspool-writer")
		if len(pools.Spec.Validations) != 1 || pools.Spec.Validations[0].Expression != want {
			t.Errorf("namespace %s: AddressPool validations %+v, want %s", ns, pools.Spec.Validations, want)
		}
	}
}

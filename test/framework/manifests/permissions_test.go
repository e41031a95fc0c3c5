package manifests

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/groundcloud/groundcloud/test/framework/controlplane"
)

// resource is an API group and a resource (with its subresource).
type resource struct{ group, name string }

func (r resource) String() string {
	if r.group == "" {
		return r.name
	}
	return r.name + "." + r.group
}

// grant is what the allow-list permits on one resource.
type grant struct {
	verbs []string
	// namespace, when set, is the only namespace the rule may apply in.
	namespace string
	// names, when set, are the only objects the rule may name, and it must
	// name some — except for the verbs in unnamed, whose requests carry
	// no name (create by POST).
	names   []string
	unnamed []string
}

// allowed is the allow-list: every verb each component may hold, and
// nothing more. deploy/*/rbac.yaml says which code needs each. Adding to
// it is a decision to review, not a way to make this test pass; a verb the
// manifests stop granting must go from here too.
var allowed = map[string]map[resource]grant{
	"groundcloud-controller-manager": {
		{"", "nodes"}:           {verbs: []string{"get", "list", "watch", "update", "patch", "delete"}},
		{"", "nodes/status"}:    {verbs: []string{"patch"}},
		{"", "services"}:        {verbs: []string{"list", "watch"}},
		{"", "services/status"}: {verbs: []string{"patch"}},
		{"", "pods"}:            {verbs: []string{"list", "delete"}},
		{"", "pods/status"}:     {verbs: []string{"patch"}},
		{"", "events"}:          {verbs: []string{"create", "patch"}},
		{"authentication.k8s.io", "tokenreviews"}:        {verbs: []string{"create"}},
		{"authorization.k8s.io", "subjectaccessreviews"}: {verbs: []string{"create"}},
		{"apiextensions.k8s.io", "customresourcedefinitions"}: {
			verbs: []string{"get", "create", "patch"},
			names: []string{"loadbalancers.groundcloud.io", "routes.groundcloud.io", "addresspools.groundcloud.io"},
		},
		{"groundcloud.io", "loadbalancers"}:        {verbs: []string{"get", "list", "watch", "create", "update", "delete"}},
		{"groundcloud.io", "loadbalancers/status"}: {verbs: []string{"patch"}},
		{"groundcloud.io", "routes"}:               {verbs: []string{"get", "list", "create", "update", "delete"}},
		{"groundcloud.io", "addresspools"}:         {verbs: []string{"list", "create", "update", "delete"}},
		{"coordination.k8s.io", "leases"}: {
			verbs: []string{"get", "update", "create"}, namespace: "kube-system",
			names: []string{"groundcloud-controller-manager"}, unnamed: []string{"create"},
		},
		{"", "configmaps"}: {
			verbs: []string{"get", "list", "watch"}, namespace: "kube-system",
			names: []string{"extension-apiserver-authentication"},
		},
	},
	"groundcloud-agent": {
		{"groundcloud.io", "loadbalancers"}:        {verbs: []string{"list", "watch"}},
		{"groundcloud.io", "loadbalancers/status"}: {verbs: []string{"patch"}},
		{"", "events"}:         {verbs: []string{"create", "patch"}},
		{"", "nodes"}:          {verbs: []string{"get", "list", "watch"}},
		{"apps", "daemonsets"}: {verbs: []string{"get"}, names: []string{"groundcloud-agent"}},
	},
	"groundcloud-router": {
		{"groundcloud.io", "routes"}:        {verbs: []string{"list", "watch"}},
		{"groundcloud.io", "routes/status"}: {verbs: []string{"patch"}},
		{"", "nodes/status"}:                {verbs: []string{"patch"}},
	},
}

// neverVerbs let a holder grant itself more.
var neverVerbs = []string{"escalate", "bind", "impersonate"}

// TestPermissions checks the rules deploy/ and deploy/router/ bind to each
// component's ServiceAccount against the allow-list.
func TestPermissions(t *testing.T) {
	objs := renderAll(t)
	for sa, allow := range allowed {
		t.Run(sa, func(t *testing.T) {
			rules, err := Rules(objs, types.NamespacedName{Namespace: "kube-system", Name: sa})
			if err != nil {
				t.Fatal(err)
			}
			if len(rules) == 0 {
				t.Fatal("no rules bound")
			}
			for _, p := range permissionProblems(rules, allow) {
				t.Error(p)
			}
		})
	}
	// Nothing else in deploy/ is bound to anyone.
	for _, o := range objs {
		if o.GroupVersionKind().Group == rbacv1.GroupName && strings.HasSuffix(o.GetKind(), "Binding") && !slices.Contains(slices.Collect(maps.Keys(allowed)), o.GetName()) {
			t.Errorf("%s %s binds something the allow-list does not know", o.GetKind(), key(o))
		}
	}
}

// permissionProblems lists every way rules exceed allow, and every verb
// allow lists that no rule grants.
func permissionProblems(rules []Rule, allow map[resource]grant) []string {
	var problems []string
	report := func(r Rule, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s (%s): %s", r.Role, r.Binding, fmt.Sprintf(format, args...)))
	}
	granted := map[resource][]string{}
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 {
			report(r, "nonResourceURLs %q: none are needed", r.NonResourceURLs)
		}
		for _, list := range [][]string{r.APIGroups, r.Resources, r.Verbs, r.ResourceNames} {
			if slices.ContainsFunc(list, func(s string) bool { return strings.Contains(s, "*") }) {
				report(r, "wildcard in %q", list)
			}
		}
		for _, v := range r.Verbs {
			if slices.Contains(neverVerbs, v) {
				report(r, "verb %s", v)
			}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				key := resource{g, res}
				if g == "" && (res == "secrets" || strings.HasPrefix(res, "secrets/")) {
					report(r, "access to secrets: the cloud-config is a mounted file, the agent needs none")
				}
				a, ok := allow[key]
				if !ok {
					report(r, "%s is not in the allow-list", key)
					continue
				}
				for _, v := range r.Verbs {
					granted[key] = append(granted[key], v)
					report := func(format string, args ...any) { report(r, "%s %s: "+format, append([]any{v, key}, args...)...) }
					switch {
					case !slices.Contains(a.verbs, v):
						report("not in the allow-list %q", a.verbs)
					case a.namespace != "" && r.Namespace != a.namespace:
						report("applies in %q, allowed only in namespace %s", r.Namespace, a.namespace)
					case len(a.names) > 0 && !slices.Contains(a.unnamed, v) && len(r.ResourceNames) == 0:
						report("not limited to resourceNames %q", a.names)
					case slices.ContainsFunc(r.ResourceNames, func(n string) bool { return !slices.Contains(a.names, n) && len(a.names) > 0 }):
						report("resourceNames %q beyond %q", r.ResourceNames, a.names)
					}
				}
			}
		}
	}
	for key, a := range allow {
		for _, v := range a.verbs {
			if !slices.Contains(granted[key], v) {
				problems = append(problems, fmt.Sprintf("the allow-list has %s %s, which no rule grants: remove it from the list", v, key))
			}
		}
	}
	slices.Sort(problems)
	return problems
}

// TestPermissionProblems: the permission check notices what it must.
func TestPermissionProblems(t *testing.T) {
	allow := map[resource]grant{
		{"", "nodes"}:                     {verbs: []string{"get", "list"}},
		{"coordination.k8s.io", "leases"}: {verbs: []string{"get", "create"}, namespace: "kube-system", names: []string{"l"}, unnamed: []string{"create"}},
	}
	base := []Rule{
		rule("", "nodes", "get", "list"),
		inNamespace("kube-system", named(rule("coordination.k8s.io", "leases", "get"), "l")),
		inNamespace("kube-system", rule("coordination.k8s.io", "leases", "create")),
	}
	tests := []struct {
		name  string
		extra Rule
		want  string // "" for no problem
	}{
		{name: "exactly the list"},
		{name: "wildcard verb", extra: rule("", "nodes", "*"), want: "wildcard"},
		{name: "wildcard resource", extra: rule("", "*", "get"), want: "wildcard"},
		{name: "wildcard group", extra: rule("*", "nodes", "get"), want: "wildcard"},
		{name: "subresource wildcard", extra: rule("", "nodes/*", "get"), want: "wildcard"},
		{name: "secrets", extra: rule("", "secrets", "get"), want: "access to secrets"},
		{name: "escalate", extra: rule("rbac.authorization.k8s.io", "clusterroles", "escalate"), want: "verb escalate"},
		{name: "verb beyond the list", extra: rule("", "nodes", "delete"), want: "delete nodes: not in the allow-list"},
		{name: "unknown resource", extra: rule("", "pods", "list"), want: "pods is not in the allow-list"},
		{name: "cluster-wide lease", extra: named(rule("coordination.k8s.io", "leases", "get"), "l"), want: `applies in "", allowed only in namespace kube-system`},
		{name: "any lease", extra: inNamespace("kube-system", rule("coordination.k8s.io", "leases", "get")), want: "not limited to resourceNames"},
		{name: "another lease", extra: inNamespace("kube-system", named(rule("coordination.k8s.io", "leases", "get"), "kube-scheduler")), want: "beyond"},
		{name: "non-resource URL", extra: Rule{PolicyRule: rbacv1.PolicyRule{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}, Role: "ClusterRole test"}, want: "nonResourceURLs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules := slices.Clone(base)
			if tt.extra.Role != "" {
				rules = append(rules, tt.extra)
			}
			got := strings.Join(permissionProblems(rules, allow), "\n")
			switch {
			case tt.want == "" && got != "":
				t.Errorf("problems:\n%s", got)
			case !strings.Contains(got, tt.want):
				t.Errorf("problems lack %q:\n%s", tt.want, got)
			}
		})
	}
	// A verb the list has but no rule grants.
	got := strings.Join(permissionProblems(base[:1], allow), "\n")
	if !strings.Contains(got, "the allow-list has get leases.coordination.k8s.io, which no rule grants") {
		t.Errorf("unused allow-list entry not reported:\n%s", got)
	}
}

// TestRBACRulesAreDocumented: every rule in deploy/*/rbac.yaml has a
// comment right above it saying which code needs it.
func TestRBACRulesAreDocumented(t *testing.T) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "deploy", "*", "rbac.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no deploy/*/rbac.yaml: %v", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		prev := ""
		for i, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "- apiGroups:") && !strings.HasPrefix(strings.TrimSpace(prev), "#") {
				t.Errorf("%s:%d: rule without a comment saying which code needs it", f, i+1)
			}
			prev = line
		}
	}
}

func rule(group, res string, verbs ...string) Rule {
	return Rule{
		PolicyRule: rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{res}, Verbs: verbs},
		Role:       "ClusterRole test", Binding: "ClusterRoleBinding test",
	}
}

func named(r Rule, names ...string) Rule { r.ResourceNames = names; return r }

func inNamespace(ns string, r Rule) Rule { r.Namespace = ns; return r }

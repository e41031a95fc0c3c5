package manifests

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/types"
)

const rbacObjects = `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: nodes}
rules:
  - {apiGroups: [""], resources: [nodes], verbs: [list]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: nodes}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: nodes}
subjects:
  - {kind: ServiceAccount, name: sa, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: leases, namespace: kube-system}
rules:
  - {apiGroups: [coordination.k8s.io], resources: [leases], resourceNames: [l], verbs: [get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: leases, namespace: kube-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: leases}
subjects:
  - {kind: ServiceAccount, name: sa}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: nodes-in-default, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: nodes}
subjects:
  - {kind: Group, name: "system:serviceaccounts:kube-system"}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: someone-else}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: nodes}
subjects:
  - {kind: ServiceAccount, name: sa, namespace: other}
  - {kind: User, name: sa}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: sa, namespace: kube-system}
`

func TestRules(t *testing.T) {
	objs, err := Parse([]byte(rbacObjects))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Rules(objs, types.NamespacedName{Namespace: "kube-system", Name: "sa"})
	if err != nil {
		t.Fatal(err)
	}
	nodes := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list"}}
	want := []Rule{
		{PolicyRule: nodes, Binding: "ClusterRoleBinding nodes", Role: "ClusterRole nodes"},
		{
			PolicyRule: rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"l"}, Verbs: []string{"get"}},
			Namespace:  "kube-system", Binding: "RoleBinding kube-system/leases", Role: "Role kube-system/leases",
		},
		{PolicyRule: nodes, Namespace: "default", Binding: "RoleBinding default/nodes-in-default", Role: "ClusterRole nodes"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Rules (-want +got):\n%s", diff)
	}

	if got, err := Rules(objs, types.NamespacedName{Namespace: "default", Name: "nobody"}); err != nil || len(got) != 0 {
		t.Errorf("rules of an unbound ServiceAccount: %v, %v", got, err)
	}
}

func TestRulesErrors(t *testing.T) {
	const broken = `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: builtin}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:auth-delegator}
subjects: [{kind: ServiceAccount, name: sa, namespace: ns}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: elsewhere, namespace: ns}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: r}
subjects: [{kind: ServiceAccount, name: sa}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: r, namespace: other}
rules: []
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: agg}
aggregationRule: {clusterRoleSelectors: [{matchLabels: {a: b}}]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: agg}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: agg}
subjects: [{kind: ServiceAccount, name: sa, namespace: ns}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: typo}
rules: [{apiGroups: [""], resources: [nodes], verb: [get]}]
`
	objs, err := Parse([]byte(broken))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Rules(objs, types.NamespacedName{Namespace: "ns", Name: "sa"})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"ClusterRoleBinding builtin refers to ClusterRole system:auth-delegator, which is not among the objects",
		"RoleBinding ns/elsewhere refers to Role ns/r, which is not among the objects",
		"ClusterRole agg, which aggregates",
		`ClusterRole typo: strict decoding error: unknown field "rules[0].verb"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

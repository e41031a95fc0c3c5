package manifests

import (
	"errors"
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// Rule is one RBAC rule that objects grant a ServiceAccount.
type Rule struct {
	rbacv1.PolicyRule
	// Namespace is where the rule applies: that of a RoleBinding, or ""
	// for a ClusterRole bound by a ClusterRoleBinding (every namespace and
	// cluster-scoped resources).
	Namespace string
	// Binding and Role say where the rule comes from: "ClusterRoleBinding
	// name", "RoleBinding namespace/name", "ClusterRole name", "Role
	// namespace/name".
	Binding, Role string
}

// Rules returns every rule that the ClusterRoleBindings and RoleBindings
// among objs grant the ServiceAccount sa: bindings that name it, its
// username, or a group it is in (system:serviceaccounts,
// system:serviceaccounts:<namespace>, system:authenticated). Each binding's
// role must be among objs too — a built-in role is an error, because its
// rules cannot be seen here — and must not be an aggregated ClusterRole.
// Every problem is reported at once.
func Rules(objs []*unstructured.Unstructured, sa types.NamespacedName) ([]Rule, error) {
	var (
		roles        = map[string]*rbacv1.Role{}
		clusterRoles = map[string]*rbacv1.ClusterRole{}
		bindings     []binding
		errs         []error
	)
	for _, obj := range objs {
		if obj.GroupVersionKind().Group != rbacv1.GroupName {
			continue
		}
		var err error
		switch obj.GetKind() {
		case "Role":
			r := &rbacv1.Role{}
			if err = fromUnstructured(obj, r); err == nil {
				roles[r.Namespace+"/"+r.Name] = r
			}
		case "ClusterRole":
			r := &rbacv1.ClusterRole{}
			if err = fromUnstructured(obj, r); err == nil {
				clusterRoles[r.Name] = r
			}
		case "RoleBinding":
			b := &rbacv1.RoleBinding{}
			if err = fromUnstructured(obj, b); err == nil {
				bindings = append(bindings, binding{"RoleBinding " + b.Namespace + "/" + b.Name, b.Namespace, b.RoleRef, b.Subjects})
			}
		case "ClusterRoleBinding":
			b := &rbacv1.ClusterRoleBinding{}
			if err = fromUnstructured(obj, b); err == nil {
				bindings = append(bindings, binding{"ClusterRoleBinding " + b.Name, "", b.RoleRef, b.Subjects})
			}
		}
		if err != nil {
			errs = append(errs, err)
		}
	}

	var rules []Rule
	for _, b := range bindings {
		if !slices.ContainsFunc(b.subjects, func(s rbacv1.Subject) bool { return names(s, sa, b.namespace) }) {
			continue
		}
		role, policy, err := resolve(b, roles, clusterRoles)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, p := range policy {
			rules = append(rules, Rule{PolicyRule: p, Namespace: b.namespace, Binding: b.name, Role: role})
		}
	}
	return rules, errors.Join(errs...)
}

// binding is a RoleBinding (namespace set) or a ClusterRoleBinding.
type binding struct {
	name      string
	namespace string
	roleRef   rbacv1.RoleRef
	subjects  []rbacv1.Subject
}

// resolve returns the role a binding refers to and its rules.
func resolve(b binding, roles map[string]*rbacv1.Role, clusterRoles map[string]*rbacv1.ClusterRole) (string, []rbacv1.PolicyRule, error) {
	ref := b.roleRef
	switch {
	case ref.APIGroup != rbacv1.GroupName:
		return "", nil, fmt.Errorf("%s: roleRef apiGroup %q", b.name, ref.APIGroup)
	case ref.Kind == "ClusterRole":
		r, ok := clusterRoles[ref.Name]
		switch {
		case !ok:
			return "", nil, fmt.Errorf("%s refers to ClusterRole %s, which is not among the objects", b.name, ref.Name)
		case r.AggregationRule != nil:
			return "", nil, fmt.Errorf("%s refers to ClusterRole %s, which aggregates rules that cannot be seen here", b.name, ref.Name)
		}
		return "ClusterRole " + r.Name, r.Rules, nil
	case ref.Kind == "Role" && b.namespace != "":
		r, ok := roles[b.namespace+"/"+ref.Name]
		if !ok {
			return "", nil, fmt.Errorf("%s refers to Role %s/%s, which is not among the objects", b.name, b.namespace, ref.Name)
		}
		return "Role " + b.namespace + "/" + r.Name, r.Rules, nil
	}
	return "", nil, fmt.Errorf("%s: cannot refer to a %s", b.name, ref.Kind)
}

// names reports whether subject s of a binding in namespace bindingNS
// (empty for a ClusterRoleBinding) includes the ServiceAccount sa.
func names(s rbacv1.Subject, sa types.NamespacedName, bindingNS string) bool {
	switch s.Kind {
	case rbacv1.ServiceAccountKind:
		ns := s.Namespace
		if ns == "" {
			ns = bindingNS // as the RBAC authorizer reads a RoleBinding
		}
		return s.Name == sa.Name && ns == sa.Namespace
	case rbacv1.UserKind:
		return s.Name == "system:serviceaccount:"+sa.Namespace+":"+sa.Name
	case rbacv1.GroupKind:
		return s.Name == "system:serviceaccounts" || s.Name == "system:serviceaccounts:"+sa.Namespace || s.Name == "system:authenticated"
	}
	return false
}

func fromUnstructured(obj *unstructured.Unstructured, into any) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, into, true); err != nil {
		return fmt.Errorf("%s %s: %w", obj.GetKind(), key(obj), err)
	}
	return nil
}

package manifests

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// TestRouterRendersWhatWeShip: deploy/router/ renders the router's
// identity, rules and DaemonSet in kube-system, and nothing else.
func TestRouterRendersWhatWeShip(t *testing.T) {
	var got []string
	for _, o := range renderKustomization(t, "deploy/router") {
		got = append(got, o.GetKind()+" "+key(o))
	}
	slices.Sort(got)
	want := []string{
		"ClusterRole groundcloud-router",
		"ClusterRoleBinding groundcloud-router",
		"DaemonSet kube-system/groundcloud-router",
		"ServiceAccount kube-system/groundcloud-router",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rendered objects (-want +got):\n%s", diff)
	}
}

// TestRouterDaemonSet checks what docs/routes.md promises of the router's
// DaemonSet: every Node, the host's network, its own Node's name, only
// CAP_NET_ADMIN.
func TestRouterDaemonSet(t *testing.T) {
	ds := object[appsv1.DaemonSet](t, renderKustomization(t, "deploy/router"), "DaemonSet", "groundcloud-router")
	spec := ds.Spec.Template.Spec
	if !spec.HostNetwork || spec.ServiceAccountName != "groundcloud-router" || spec.PriorityClassName != "system-node-critical" {
		t.Errorf("hostNetwork %t, serviceAccountName %q, priorityClassName %q", spec.HostNetwork, spec.ServiceAccountName, spec.PriorityClassName)
	}
	tolerated := slices.ContainsFunc(spec.Tolerations, func(tol corev1.Toleration) bool {
		return tol.Operator == corev1.TolerationOpExists && tol.Key == "" && tol.Effect == corev1.TaintEffectNoSchedule
	})
	if !tolerated {
		t.Errorf("tolerations %+v: want every NoSchedule taint tolerated (every Node needs its routes)", spec.Tolerations)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(spec.Containers))
	}
	c := spec.Containers[0]
	checkImage(t, c.Image, "groundcloud-router")
	if diff := cmp.Diff([]string{"--placement=node", "--node-name=$(NODE_NAME)"}, c.Args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	if len(c.Env) != 1 || c.Env[0].ValueFrom == nil || c.Env[0].ValueFrom.FieldRef == nil || c.Env[0].ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("env %+v: want NODE_NAME from spec.nodeName", c.Env)
	}
	sc := c.SecurityContext
	if sc == nil || sc.Capabilities == nil ||
		!cmp.Equal(sc.Capabilities.Add, []corev1.Capability{"NET_ADMIN"}) || !cmp.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
		sc.Privileged == nil || *sc.Privileged || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("securityContext %+v: want only NET_ADMIN, not privileged, no escalation", sc)
	}
}

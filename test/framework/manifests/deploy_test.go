package manifests

import (
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/groundcloud/groundcloud/internal/agent"
	"github.com/groundcloud/groundcloud/internal/annotation"
	"github.com/groundcloud/groundcloud/test/framework/controlplane"
)

// TestDeployRendersWhatWeShip: deploy/ renders to exactly the objects we
// mean to install, all namespaced ones in kube-system, and no Secret.
func TestDeployRendersWhatWeShip(t *testing.T) {
	objs := renderDeploy(t)
	var got []string
	for _, o := range objs {
		got = append(got, o.GetKind()+" "+key(o))
	}
	slices.Sort(got)
	want := []string{
		"ClusterRole groundcloud-agent",
		"ClusterRole groundcloud-controller-manager",
		"ClusterRoleBinding groundcloud-agent",
		"ClusterRoleBinding groundcloud-controller-manager",
		"CustomResourceDefinition addresspools.groundcloud.io",
		"CustomResourceDefinition loadbalancers.groundcloud.io",
		"CustomResourceDefinition routes.groundcloud.io",
		"DaemonSet kube-system/groundcloud-agent",
		"Deployment kube-system/groundcloud-controller-manager",
		"PodDisruptionBudget kube-system/groundcloud-controller-manager",
		"Role kube-system/groundcloud-controller-manager",
		"RoleBinding kube-system/groundcloud-controller-manager",
		"ServiceAccount kube-system/groundcloud-agent",
		"ServiceAccount kube-system/groundcloud-controller-manager",
		"ValidatingAdmissionPolicy groundcloud-addresspool-writer",
		"ValidatingAdmissionPolicy groundcloud-loadbalancer-spec",
		"ValidatingAdmissionPolicyBinding groundcloud-addresspool-writer",
		"ValidatingAdmissionPolicyBinding groundcloud-loadbalancer-spec",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rendered objects (-want +got):\n%s", diff)
	}
}

// TestControllerManagerDeployment checks what docs/install.md promises of
// the controller manager's Deployment. That its flags work is shown by
// TestComponentsWorkWithTheirRules, which runs the binary with them.
func TestControllerManagerDeployment(t *testing.T) {
	d := object[appsv1.Deployment](t, renderDeploy(t), "Deployment", "groundcloud-controller-manager")
	spec := d.Spec.Template.Spec
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas %v, want 2", d.Spec.Replicas)
	}
	if spec.ServiceAccountName != "groundcloud-controller-manager" || spec.PriorityClassName != "system-cluster-critical" || spec.HostNetwork {
		t.Errorf("serviceAccountName %q, priorityClassName %q, hostNetwork %v", spec.ServiceAccountName, spec.PriorityClassName, spec.HostNetwork)
	}
	checkTolerations(t, spec.Tolerations)
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(spec.Containers))
	}
	c := spec.Containers[0]
	checkImage(t, c.Image, "groundcloud-controller-manager")
	for _, arg := range []string{"--leader-elect=true", "--cloud-config=/etc/groundcloud/cloud.conf", "--secure-port=10258"} {
		if !slices.Contains(c.Args, arg) {
			t.Errorf("args %q lack %s", c.Args, arg)
		}
	}

	// The cloud-config: the Secret's key, mounted read-only as a directory
	// (a subPath mount would never see an update).
	var vol *corev1.Volume
	for i := range spec.Volumes {
		if s := spec.Volumes[i].Secret; s != nil && s.SecretName == "groundcloud-cloud-config" {
			vol = &spec.Volumes[i]
		}
	}
	if vol == nil {
		t.Fatalf("no volume of Secret groundcloud-cloud-config: %+v", spec.Volumes)
	}
	if diff := cmp.Diff([]corev1.KeyToPath{{Key: "cloud.conf", Path: "cloud.conf"}}, vol.Secret.Items); diff != "" {
		t.Errorf("secret items (-want +got):\n%s", diff)
	}
	mounted := false
	for _, m := range c.VolumeMounts {
		if m.Name == vol.Name {
			mounted = m.MountPath == "/etc/groundcloud" && m.ReadOnly && m.SubPath == "" && m.SubPathExpr == ""
		}
	}
	if !mounted {
		t.Errorf("cloud-config not mounted read-only at /etc/groundcloud without subPath: %+v", c.VolumeMounts)
	}

	wantProbe := &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("https"), Scheme: corev1.URISchemeHTTPS}
	for name, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("no HTTP %s probe", name)
			continue
		}
		if diff := cmp.Diff(wantProbe, p.HTTPGet); diff != "" {
			t.Errorf("%s probe (-want +got):\n%s", name, diff)
		}
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "https" || c.Ports[0].ContainerPort != 10258 {
		t.Errorf("ports %+v, want https 10258", c.Ports)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Errorf("resource requests %v, want cpu and memory", c.Resources.Requests)
	}

	pod, sc := spec.SecurityContext, c.SecurityContext
	switch {
	case pod == nil || sc == nil:
		t.Fatal("no securityContext")
	case pod.RunAsNonRoot == nil || !*pod.RunAsNonRoot || pod.RunAsUser == nil || *pod.RunAsUser != 65532:
		t.Errorf("pod runs as %v (nonRoot %v), want 65532 non-root", pod.RunAsUser, pod.RunAsNonRoot)
	case pod.SeccompProfile == nil || pod.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Errorf("seccomp %+v, want RuntimeDefault", pod.SeccompProfile)
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("root filesystem writable")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("privilege escalation allowed")
	case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
		t.Errorf("capabilities %+v, want all dropped, none added", sc.Capabilities)
	}
}

// TestAgentDaemonSet checks the agent's DaemonSet, and that its arguments,
// with the variables the kubelet expands, are flags the agent accepts.
func TestAgentDaemonSet(t *testing.T) {
	ds := object[appsv1.DaemonSet](t, renderDeploy(t), "DaemonSet", "groundcloud-agent")
	spec := ds.Spec.Template.Spec
	if spec.ServiceAccountName != "groundcloud-agent" || !spec.HostNetwork {
		t.Errorf("serviceAccountName %q, hostNetwork %v", spec.ServiceAccountName, spec.HostNetwork)
	}
	// Only labels an administrator sets (TestNodesCannotLabelThemselvesIn),
	// and the OS.
	wantSelector := map[string]string{annotation.LoadBalancerHostLabel: "true", corev1.LabelOSStable: "linux"}
	if diff := cmp.Diff(wantSelector, spec.NodeSelector); diff != "" {
		t.Errorf("nodeSelector (-want +got):\n%s", diff)
	}
	checkTolerations(t, spec.Tolerations)
	// Two Secrets as files, the gossip key and the cloud-config (for its
	// BGP peers); no host path.
	for _, v := range spec.Volumes {
		switch {
		case v.HostPath != nil:
			t.Errorf("volume %s: the agent mounts no host path", v.Name)
		case v.Secret != nil && v.Secret.SecretName != "groundcloud-gossip-key" && v.Secret.SecretName != "groundcloud-cloud-config":
			t.Errorf("volume %s: Secret %s; the agent mounts only groundcloud-gossip-key and groundcloud-cloud-config", v.Name, v.Secret.SecretName)
		}
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(spec.Containers))
	}
	c := spec.Containers[0]
	checkImage(t, c.Image, "groundcloud-agent")

	sc := c.SecurityContext
	if sc == nil || sc.Capabilities == nil {
		t.Fatal("no capabilities in the securityContext")
	}
	if diff := cmp.Diff([]corev1.Capability{"NET_ADMIN", "NET_RAW", "NET_BIND_SERVICE"}, sc.Capabilities.Add); diff != "" {
		t.Errorf("added capabilities (-want +got):\n%s", diff)
	}
	if !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("dropped capabilities %v, want ALL", sc.Capabilities.Drop)
	}
	if sc.Privileged == nil || *sc.Privileged || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("privileged %v, allowPrivilegeEscalation %v: want both false", sc.Privileged, sc.AllowPrivilegeEscalation)
	}

	for name, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("no HTTP %s probe", name)
			continue
		}
		path := map[string]string{"liveness": "/healthz", "readiness": "/readyz"}[name]
		wantProbe := &corev1.HTTPGetAction{Host: "127.0.0.1", Path: path, Port: intstr.FromInt32(10263), Scheme: corev1.URISchemeHTTP}
		if diff := cmp.Diff(wantProbe, p.HTTPGet); diff != "" {
			t.Errorf("%s probe (-want +got):\n%s", name, diff)
		}
	}

	// The kubelet expands $(VAR) from the container's env; the downward API
	// gives NODE_NAME.
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName":
			env[e.Name] = "lb-node-1"
		}
	}
	var args []string
	for _, a := range c.Args {
		args = append(args, expand(a, env))
	}
	cmd := agent.NewCommand()
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatalf("the agent refuses the DaemonSet's args %q: %v", args, err)
	}
	for flag, want := range map[string]string{"interface": "eth0", "host-name": "lb-node-1", "metrics-bind-address": "127.0.0.1:10263", "vip-ownership": "memberlist"} {
		if got := cmd.Flags().Lookup(flag).Value.String(); got != want {
			t.Errorf("--%s = %q, want %q (args %q)", flag, got, want, args)
		}
	}
	// The key file is where the gossip key Secret is mounted, read-only.
	keyFile := cmd.Flags().Lookup("gossip-key-file").Value.String()
	mounted := false
	for _, m := range c.VolumeMounts {
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.Secret != nil && v.Secret.SecretName == "groundcloud-gossip-key" &&
				m.ReadOnly && path.Dir(keyFile) == path.Clean(m.MountPath) && secretHasKey(v.Secret, path.Base(keyFile)) {
				mounted = true
			}
		}
	}
	if !mounted {
		t.Errorf("--gossip-key-file=%s is not a key of Secret groundcloud-gossip-key mounted read-only", keyFile)
	}
}

// secretHasKey: a Secret volume without items projects every key as a file
// of its name; with items, only those listed.
func secretHasKey(s *corev1.SecretVolumeSource, key string) bool {
	if len(s.Items) == 0 {
		return true
	}
	return slices.ContainsFunc(s.Items, func(k corev1.KeyToPath) bool { return k.Path == key })
}

// expand replaces $(NAME) as the kubelet does in a container's args.
func expand(s string, env map[string]string) string {
	for name, value := range env {
		s = strings.ReplaceAll(s, "$("+name+")", value)
	}
	return s
}

// checkTolerations: both components run on Nodes not yet initialised, not
// yet Ready, and on control-plane Nodes (docs/install.md says why).
func checkTolerations(t *testing.T, tols []corev1.Toleration) {
	t.Helper()
	want := []corev1.Toleration{
		{Key: "node.cloudprovider.kubernetes.io/uninitialized", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule},
		{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	}
	for _, w := range want {
		if !slices.Contains(tols, w) {
			t.Errorf("no toleration %+v in %+v", w, tols)
		}
	}
	for _, tol := range tols {
		if tol.Key == "" && tol.Operator == corev1.TolerationOpExists {
			t.Errorf("toleration of every taint: %+v", tol)
		}
	}
}

// checkImage: the image is named after the binary its Dockerfile builds.
func checkImage(t *testing.T, image, bin string) {
	t.Helper()
	name, _, _ := strings.Cut(path.Base(image), ":")
	if name != bin {
		t.Errorf("image %s, want one named %s (deploy/images/%s)", image, bin, bin)
	}
}

// TestDeployAppliesStrictly applies every rendered object to a real
// apiserver by server-side apply with fieldValidation=Strict, so that a
// schema error or an unknown field fails; then runs the documented
// `kubectl apply -k deploy/`.
func TestDeployAppliesStrictly(t *testing.T) {
	objs := renderAll(t)
	cp := controlplane.StartT(t, controlplane.Options{Users: []controlplane.User{}})
	if err := applyAll(t, cp, objs); err != nil {
		t.Fatal(err)
	}

	// A misspelt field is refused, not dropped. (For built-in kinds
	// server-side apply refuses fields its schema lacks anyway; Strict also
	// covers custom resources, whose unknown fields would be pruned
	// silently.)
	var typo *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "DaemonSet" {
			typo = o.DeepCopy()
		}
	}
	containers, _, _ := unstructured.NestedSlice(typo.Object, "spec", "template", "spec", "containers")
	containers[0].(map[string]any)["livenessprobe"] = map[string]any{}
	if err := unstructured.SetNestedSlice(typo.Object, containers, "spec", "template", "spec", "containers"); err != nil {
		t.Fatal(err)
	}
	err := applyAll(t, cp, []*unstructured.Unstructured{typo})
	if err == nil || !strings.Contains(err.Error(), "livenessprobe") {
		t.Errorf("apply with a misspelt field: got %v, want an error naming it", err)
	}

	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"deploy", "deploy/router"} {
		out, err := cp.Kubectl(t.Context(), "apply", "-k", filepath.Join(root, filepath.FromSlash(dir)))
		if err != nil {
			t.Fatalf("kubectl apply -k %s/: %v\n%s", dir, err, out)
		}
		t.Logf("kubectl apply -k %s/:\n%s", dir, out)
	}
}

// TestDeployInstallsEveryCRD: `kubectl apply -k deploy/` installs every CRD
// of deploy/crds, and the controller manager — which applies every one of
// them at start (internal/crdinstall embeds deploy/crds/*.yaml) —
// may apply exactly those. A new generated CRD must be added to both
// deploy/kustomization.yaml and the resourceNames of the
// customresourcedefinitions rule in deploy/controller-manager/rbac.yaml.
func TestDeployInstallsEveryCRD(t *testing.T) {
	objs := renderDeploy(t)
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "deploy", "crds", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var generated []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crds, err := Parse(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, c := range crds {
			generated = append(generated, c.GetName())
		}
	}
	slices.Sort(generated)

	var rendered []string
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			rendered = append(rendered, o.GetName())
		}
	}
	slices.Sort(rendered)
	if diff := cmp.Diff(generated, rendered); diff != "" {
		t.Errorf("CRDs in deploy/crds (-) and in deploy/kustomization.yaml (+):\n%s", diff)
	}

	role := object[rbacv1.ClusterRole](t, objs, "ClusterRole", "groundcloud-controller-manager")
	var allowed []string
	for _, r := range role.Rules {
		if slices.Contains(r.Resources, "customresourcedefinitions") {
			allowed = append(allowed, r.ResourceNames...)
		}
	}
	slices.Sort(allowed)
	if diff := cmp.Diff(generated, slices.Compact(allowed)); diff != "" {
		t.Errorf("CRDs in deploy/crds (-) and those the controller manager may install (+):\n%s", diff)
	}
}

// TestDeployBGPPasswords: the component deploy/agent/bgp-passwords/ mounts
// the Secret of BGP passwords where docs/bgp.md's password-file names it.
func TestDeployBGPPasswords(t *testing.T) {
	ds := object[appsv1.DaemonSet](t, renderKustomization(t, deployBGPPasswords), "DaemonSet", "groundcloud-agent")
	checkBGPPasswords(t, ds.Spec.Template.Spec, "groundcloud-bgp-passwords", "/etc/groundcloud/bgp")
}

func TestDeployBMCCredentials(t *testing.T) {
	d := object[appsv1.Deployment](t, renderKustomization(t, deployBMCCredentials), "Deployment", "groundcloud-controller-manager")
	checkSecretMount(t, d.Spec.Template.Spec, "bmc-credentials", "groundcloud-bmc-credentials", "/etc/groundcloud-bmc", 0o440)
}

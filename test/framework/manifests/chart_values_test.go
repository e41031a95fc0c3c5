package manifests

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/groundcloud/groundcloud/internal/agent"
	"github.com/groundcloud/groundcloud/internal/ccm"
	"github.com/groundcloud/groundcloud/internal/config"
	"github.com/groundcloud/groundcloud/internal/router"
)

// chartValues is testdata/chart-values.yaml as the tests read it.
type chartValues struct {
	CloudConfig struct {
		Inline, SecretName, Key string
	} `json:"cloudConfig"`
	ControllerManager struct {
		Resources    corev1.ResourceRequirements `json:"resources"`
		NodeSelector map[string]string           `json:"nodeSelector"`
		Tolerations  []corev1.Toleration         `json:"tolerations"`
	} `json:"controllerManager"`
	Agent struct {
		NodeSelector map[string]string           `json:"nodeSelector"`
		Tolerations  []corev1.Toleration         `json:"tolerations"`
		Resources    corev1.ResourceRequirements `json:"resources"`
	} `json:"agent"`
}

func readCustomValues(t *testing.T) chartValues {
	t.Helper()
	data, err := os.ReadFile(customValues(t))
	if err != nil {
		t.Fatal(err)
	}
	var v chartValues
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestChartControllerManagerValues: each value of the controller manager
// lands where it should, and the binary accepts the arguments.
func TestChartControllerManagerValues(t *testing.T) {
	h := newHelm(t)
	v := readCustomValues(t)
	objs := renderChart(t, h, otherNamespace, []string{customValues(t)})
	d := object[appsv1.Deployment](t, objs, "Deployment", "groundcloud-controller-manager")
	spec := d.Spec.Template.Spec
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
		t.Errorf("replicas %v, want 3", d.Spec.Replicas)
	}
	c := spec.Containers[0]
	if c.Image != "registry.example/groundcloud/ccm:v1.2.3" || c.ImagePullPolicy != corev1.PullAlways {
		t.Errorf("image %s, pull policy %s", c.Image, c.ImagePullPolicy)
	}
	if diff := cmp.Diff(v.ControllerManager.Resources, c.Resources); diff != "" {
		t.Errorf("resources (-values +rendered):\n%s", diff)
	}
	if diff := cmp.Diff(v.ControllerManager.NodeSelector, spec.NodeSelector); diff != "" {
		t.Errorf("nodeSelector (-values +rendered):\n%s", diff)
	}
	if diff := cmp.Diff(v.ControllerManager.Tolerations, spec.Tolerations); diff != "" {
		t.Errorf("tolerations (-values +rendered):\n%s", diff)
	}
	if spec.Affinity != nil || spec.PriorityClassName != "" {
		t.Errorf("affinity %+v, priorityClassName %q: want none", spec.Affinity, spec.PriorityClassName)
	}

	cmd, err := ccm.NewCommand()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.ParseFlags(c.Args); err != nil {
		t.Fatalf("the controller manager refuses the args %q: %v", c.Args, err)
	}
	for flag, want := range map[string]string{"cloud-config": "/etc/groundcloud/lab.conf", "concurrent-service-syncs": "7", "v": "4", "leader-elect": "true", "load-balancer-class-only": "true"} {
		if got := cmd.Flags().Lookup(flag).Value.String(); got != want {
			t.Errorf("--%s = %q, want %q (args %q)", flag, got, want, c.Args)
		}
	}

	// The cloud-config: the chart's Secret, mounted where --cloud-config
	// points, and a file the controller manager accepts.
	vol := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Secret != nil })
	if vol < 0 || spec.Volumes[vol].Secret.SecretName != "lab-cloud-config" ||
		!cmp.Equal(spec.Volumes[vol].Secret.Items, []corev1.KeyToPath{{Key: "lab.conf", Path: "lab.conf"}}) {
		t.Fatalf("volumes %+v, want Secret lab-cloud-config with item lab.conf", spec.Volumes)
	}
	s := object[corev1.Secret](t, objs, "Secret", "lab-cloud-config")
	if s.Namespace != otherNamespace || s.StringData["lab.conf"] != v.CloudConfig.Inline {
		t.Errorf("Secret %s/%s holds %q, want the inline cloud-config", s.Namespace, s.Name, s.StringData)
	}
	if _, err := config.Parse("lab.conf", []byte(s.StringData["lab.conf"])); err != nil {
		t.Errorf("the inline cloud-config: %v", err)
	}
	checkSecretMount(t, spec, "bmc-credentials", "lab-bmc", "/etc/lab/bmc", 0o440)
}

// TestChartAgentValues: each value of the agent lands where it should, and
// the agent accepts the arguments as the kubelet expands them.
func TestChartAgentValues(t *testing.T) {
	h := newHelm(t)
	v := readCustomValues(t)
	ds := object[appsv1.DaemonSet](t, renderChart(t, h, otherNamespace, []string{customValues(t)}), "DaemonSet", "groundcloud-agent")
	spec := ds.Spec.Template.Spec
	c := spec.Containers[0]
	if c.Image != "registry.example/groundcloud/agent:v1.2.3" || c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("image %s, pull policy %s", c.Image, c.ImagePullPolicy)
	}
	// requests: null dropped the default requests.
	if diff := cmp.Diff(corev1.ResourceRequirements{Limits: v.Agent.Resources.Limits}, c.Resources); diff != "" {
		t.Errorf("resources (-values +rendered):\n%s", diff)
	}
	// Merged with the default, whose load-balancer host label is null.
	if diff := cmp.Diff(map[string]string{"example.com/edge": "yes", "kubernetes.io/os": "linux"}, spec.NodeSelector); diff != "" {
		t.Errorf("nodeSelector (-want +rendered):\n%s", diff)
	}
	if diff := cmp.Diff(v.Agent.Tolerations, spec.Tolerations); diff != "" {
		t.Errorf("tolerations (-values +rendered):\n%s", diff)
	}
	if spec.PriorityClassName != "system-cluster-critical" {
		t.Errorf("priorityClassName %q", spec.PriorityClassName)
	}
	if spec.Volumes[0].Secret == nil || spec.Volumes[0].Secret.SecretName != "lab-gossip" {
		t.Errorf("volumes %+v, want the Secret lab-gossip", spec.Volumes)
	}

	cmd := parseAgentArgs(t, c)
	for flag, want := range map[string]string{
		"interface": "bond0.42", "host-name": "lb-node-1", "metrics-bind-address": "0.0.0.0:19263",
		"gossip-key-file": "/etc/groundcloud/gossip/psk", "vip-ownership": "memberlist",
		"gossip-seeds": "[192.0.2.5,192.0.2.6]", "health-interval": "3s",
	} {
		if got := cmd.Flags().Lookup(flag).Value.String(); got != want {
			t.Errorf("--%s = %q, want %q (args %q)", flag, got, want, c.Args)
		}
	}
	if m := c.VolumeMounts[0]; m.MountPath != "/etc/groundcloud/gossip" || !m.ReadOnly {
		t.Errorf("gossip key mounted %+v", m)
	}
	checkBGPPasswords(t, spec, "lab-bgp", "/etc/lab/bgp")
}

// checkBGPPasswords: the Secret of BGP passwords is mounted read-only in
// the agent at path, optional, readable by its owner only.
func checkBGPPasswords(t *testing.T, spec corev1.PodSpec, secret, path string) {
	t.Helper()
	checkSecretMount(t, spec, "bgp-passwords", secret, path, 0o400)
}

// checkSecretMount: volume name is Secret secret, optional, with mode, and
// mounted read-only at path in the first container.
func checkSecretMount(t *testing.T, spec corev1.PodSpec, name, secret, path string, mode int32) {
	t.Helper()
	want := corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: secret, DefaultMode: ptr.To(mode), Optional: ptr.To(true),
	}}}
	if i := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == want.Name }); i < 0 {
		t.Errorf("volumes %+v lack %s", spec.Volumes, want.Name)
	} else if diff := cmp.Diff(want, spec.Volumes[i]); diff != "" {
		t.Errorf("volume (-want +got):\n%s", diff)
	}
	mount := corev1.VolumeMount{Name: name, MountPath: path, ReadOnly: true}
	if !slices.ContainsFunc(spec.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool { return cmp.Equal(m, mount) }) {
		t.Errorf("mounts %+v lack %+v", spec.Containers[0].VolumeMounts, mount)
	}
}

// parseAgentArgs parses a container's args with the agent's flags after
// expanding $(VAR) as the kubelet does (NODE_NAME = lb-node-1).
func parseAgentArgs(t *testing.T, c corev1.Container) *cobra.Command {
	t.Helper()
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
		t.Fatalf("the agent refuses the args %q: %v", args, err)
	}
	return cmd
}

// TestChartAgentMetricsAddress: the agent listens where the values say and
// the kubelet probes it there (on loopback when it listens everywhere).
func TestChartAgentMetricsAddress(t *testing.T) {
	h := newHelm(t)
	tests := []struct {
		address, wantBind, wantProbe string
	}{
		{"127.0.0.1", "127.0.0.1:10263", "127.0.0.1"},
		{"0.0.0.0", "0.0.0.0:10263", "127.0.0.1"},
		{"::", "[::]:10263", "127.0.0.1"},
		{"192.0.2.5", "192.0.2.5:10263", "192.0.2.5"},
		{"2001:db8::5", "[2001:db8::5]:10263", "2001:db8::5"},
	}
	for _, tt := range tests {
		t.Run(tt.address, func(t *testing.T) {
			objs := renderChart(t, h, "kube-system", nil, "agent.metrics.address="+tt.address)
			c := object[appsv1.DaemonSet](t, objs, "DaemonSet", "groundcloud-agent").Spec.Template.Spec.Containers[0]
			if got := parseAgentArgs(t, c).Flags().Lookup("metrics-bind-address").Value.String(); got != tt.wantBind {
				t.Errorf("--metrics-bind-address = %q, want %q", got, tt.wantBind)
			}
			for name, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
				path := map[string]string{"liveness": "/healthz", "readiness": "/readyz"}[name]
				want := &corev1.HTTPGetAction{Host: tt.wantProbe, Path: path, Port: intstr.FromInt32(10263), Scheme: corev1.URISchemeHTTP}
				if diff := cmp.Diff(want, p.HTTPGet); diff != "" {
					t.Errorf("%s probe (-want +got):\n%s", name, diff)
				}
			}
		})
	}
}

// TestChartMonitoring: the PrometheusRule holds the rule groups of
// deploy/monitoring unchanged, the dashboard ConfigMap the dashboard.
func TestChartMonitoring(t *testing.T) {
	h := newHelm(t)
	objs := renderChart(t, h, otherNamespace, []string{customValues(t)})
	root := filepath.Dir(filepath.Dir(chartDir(t)))
	rules, err := os.ReadFile(filepath.Join(root, "deploy", "monitoring", "groundcloud.rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := yaml.Unmarshal(rules, &want); err != nil {
		t.Fatal(err)
	}
	var rule map[string]any
	for _, o := range objs {
		if o.GetKind() == "PrometheusRule" {
			rule = o.Object
			if o.GetLabels()["release"] != "kube-prometheus-stack" {
				t.Errorf("PrometheusRule labels %v lack release=kube-prometheus-stack", o.GetLabels())
			}
		}
	}
	if diff := cmp.Diff(want, rule["spec"]); diff != "" {
		t.Errorf("PrometheusRule spec (-deploy/monitoring +chart):\n%s", diff)
	}

	dashboard, err := os.ReadFile(filepath.Join(root, "deploy", "monitoring", "groundcloud-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	cm := object[corev1.ConfigMap](t, objs, "ConfigMap", "groundcloud-dashboard")
	if got := cm.Data["groundcloud-dashboard.json"]; got != string(dashboard) {
		t.Errorf("dashboard ConfigMap differs from deploy/monitoring/groundcloud-dashboard.json")
	}
	if cm.Labels["grafana_dashboard"] != "1" || cm.Labels["team"] != "network" {
		t.Errorf("dashboard ConfigMap labels %v", cm.Labels)
	}
}

// TestChartRouterValues: each value of the router lands where it should,
// and the router accepts the arguments.
func TestChartRouterValues(t *testing.T) {
	h := newHelm(t)
	ds := object[appsv1.DaemonSet](t, renderChart(t, h, otherNamespace, []string{customValues(t)}), "DaemonSet", "groundcloud-router")
	spec := ds.Spec.Template.Spec
	c := spec.Containers[0]
	if c.Image != "registry.example/groundcloud/router:v1.2.3" || c.ImagePullPolicy != corev1.PullNever {
		t.Errorf("image %s, pull policy %s", c.Image, c.ImagePullPolicy)
	}
	// Maps merge with the defaults (requests stay); lists replace them.
	want := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: apiresource.MustParse("10m"), corev1.ResourceMemory: apiresource.MustParse("32Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: apiresource.MustParse("64Mi")},
	}
	if !cmp.Equal(want.Requests, c.Resources.Requests, cmp.Comparer(apiresource.Quantity.Equal)) ||
		!cmp.Equal(want.Limits, c.Resources.Limits, cmp.Comparer(apiresource.Quantity.Equal)) {
		t.Errorf("resources %+v, want %+v", c.Resources, want)
	}
	if diff := cmp.Diff(map[string]string{"example.com/routed": "yes", "kubernetes.io/os": "linux"}, spec.NodeSelector); diff != "" {
		t.Errorf("nodeSelector (-want +rendered):\n%s", diff)
	}
	wantTol := []corev1.Toleration{{Key: "example.com/edge", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}
	if diff := cmp.Diff(wantTol, spec.Tolerations); diff != "" {
		t.Errorf("tolerations (-want +rendered):\n%s", diff)
	}
	if spec.PriorityClassName != "system-cluster-critical" || spec.ServiceAccountName != "groundcloud-router" {
		t.Errorf("priorityClassName %q, serviceAccountName %q", spec.PriorityClassName, spec.ServiceAccountName)
	}
	var args []string
	for _, a := range c.Args {
		args = append(args, expand(a, map[string]string{"NODE_NAME": "node-1"}))
	}
	cmd := router.NewCommand()
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatalf("the router refuses the args %q: %v", args, err)
	}
	for flag, want := range map[string]string{"placement": "node", "node-name": "node-1", "max-sync-interval": "2m0s"} {
		if got := cmd.Flags().Lookup(flag).Value.String(); got != want {
			t.Errorf("--%s = %q, want %q (args %q)", flag, got, want, c.Args)
		}
	}
}

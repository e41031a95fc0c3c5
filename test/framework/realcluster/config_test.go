package realcluster

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/groundcloud/groundcloud/internal/annotation"
)

func TestCNIConfig(t *testing.T) {
	data, err := cniConfig("bed", []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("fd00:10:244:1::/64")}, "/d/ipam")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, data)
	}
	bridge := got["plugins"].([]any)[0].(map[string]any)
	ipam := bridge["ipam"].(map[string]any)
	want := map[string]any{
		"type":    "host-local",
		"dataDir": "/d/ipam",
		"ranges":  []any{[]any{map[string]any{"subnet": "10.244.1.0/24"}}, []any{map[string]any{"subnet": "fd00:10:244:1::/64"}}},
		"routes":  []any{map[string]any{"dst": "0.0.0.0/0"}, map[string]any{"dst": "::/0"}},
	}
	if diff := cmp.Diff(want, ipam); diff != "" {
		t.Errorf("ipam (-want +got):\n%s", diff)
	}
	if bridge["ipMasq"] != false || bridge["isGateway"] != true {
		t.Errorf("bridge %v: want the node as gateway and no masquerading", bridge)
	}
	var types []any
	for _, p := range got["plugins"].([]any) {
		types = append(types, p.(map[string]any)["type"])
	}
	if diff := cmp.Diff([]any{"bridge", "portmap"}, types); diff != "" {
		t.Errorf("plugin chain (-want +got):\n%s", diff)
	}
	portmap := got["plugins"].([]any)[1].(map[string]any)
	if diff := cmp.Diff(map[string]any{"portMappings": true}, portmap["capabilities"]); diff != "" {
		t.Errorf("portmap capabilities (-want +got):\n%s", diff)
	}
}

func TestKubeletConfig(t *testing.T) {
	taint := corev1.Taint{Key: annotation.LoadBalancerHostTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule}
	data, err := kubeletConfig(kubeletSettings{
		paths: nodePaths{dir: "/d/lb-1"}, cgroupRoot: "/groundcloud.x/lb-1",
		nodeIP: netip.MustParseAddr("192.0.2.2"), taints: []corev1.Taint{taint},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := yaml.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]any{
		"kind":                     "KubeletConfiguration",
		"cgroupDriver":             "cgroupfs",
		"cgroupRoot":               "/groundcloud.x/lb-1",
		"failCgroupV1":             false,
		"failSwapOn":               false,
		"containerRuntimeEndpoint": "unix:///d/lb-1/containerd/containerd.sock",
		"address":                  "192.0.2.2",
		"podLogsDir":               "/d/lb-1/pods",
		"clusterDomain":            "cluster.local",
		"registerWithTaints":       []any{map[string]any{"key": annotation.LoadBalancerHostTaint, "value": "true", "effect": "NoSchedule"}},
	} {
		if diff := cmp.Diff(want, got[key]); diff != "" {
			t.Errorf("%s (-want +got):\n%s", key, diff)
		}
	}
}

func TestContainerdConfig(t *testing.T) {
	got := containerdConfig(nodePaths{dir: "/d/n"}, "localhost/groundcloud/pause:abc", "/usr/lib/cni")
	for _, want := range []string{
		`root = "/d/n/containerd/root"`,
		`address = "/d/n/containerd/containerd.sock"`,
		`sandbox_image = "localhost/groundcloud/pause:abc"`,
		"restrict_oom_score_adj = true",
		"netns_mounts_under_state_dir = true",
		"SystemdCgroup = false",
		`conf_dir = "/d/n/cni/net.d"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("containerd config lacks %q:\n%s", want, got)
		}
	}
}

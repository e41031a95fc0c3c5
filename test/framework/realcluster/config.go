package realcluster

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// nodePaths are where one node keeps its state: everything under its own
// directory, except what the kubelet and the shims insist on finding at
// fixed host paths, which the node's mount namespace covers with tmpfs
// (see holderScript).
type nodePaths struct {
	dir string
}

func (p nodePaths) path(elem ...string) string {
	return strings.Join(append([]string{p.dir}, elem...), "/")
}

func (p nodePaths) containerdConfig() string { return p.path("containerd", "config.toml") }
func (p nodePaths) containerdSocket() string { return p.path("containerd", "containerd.sock") }
func (p nodePaths) kubeletConfig() string    { return p.path("kubelet", "config.yaml") }
func (p nodePaths) kubeletKubeconfig() string {
	return p.path("kubelet", "kubeconfig")
}
func (p nodePaths) kubeletRoot() string { return p.path("kubelet", "root") }
func (p nodePaths) cniConfDir() string  { return p.path("cni", "net.d") }
func (p nodePaths) podLogs() string     { return p.path("pods") }

// containerdConfig is a node's containerd configuration: its own root,
// state and socket; the CRI plugin with the test bed's pause image, cgroupfs
// (no systemd), oom_score_adj limited to what the process may set (the
// machine's bounding set has no CAP_SYS_RESOURCE), Pod network namespaces
// under its state directory (not /run/netns) and the machine's CNI plugins.
func containerdConfig(p nodePaths, pauseImage, cniBinDir string) string {
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %[3]q

[plugins."io.containerd.internal.v1.opt"]
  path = %[4]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[5]q
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[6]q
    conf_dir = %[7]q
`, p.path("containerd", "root"), p.path("containerd", "state"), p.containerdSocket(),
		p.path("containerd", "opt"), pauseImage, cniBinDir, p.cniConfDir())
}

// kubeletSettings are what differs between the nodes' kubelets.
type kubeletSettings struct {
	paths      nodePaths
	cgroupRoot string
	nodeIP     netip.Addr
	taints     []corev1.Taint
	// clusterDNS are the kube-dns Service's addresses (cluster DNS).
	clusterDNS []netip.Addr
}

// kubeletConfig is a node's KubeletConfiguration. Beside the node's own
// paths: cgroupfs on this machine's cgroup v1 hierarchy, swap allowed, the
// server on the node's address (the apiserver reaches it for logs and
// exec, without credentials of its own: anonymous, AlwaysAllow), no image
// garbage collection and no disk-pressure eviction (the images are
// imported, nothing could pull them back).
func kubeletConfig(s kubeletSettings) ([]byte, error) {
	cfg := map[string]any{
		"apiVersion":               "kubelet.config.k8s.io/v1beta1",
		"kind":                     "KubeletConfiguration",
		"cgroupDriver":             "cgroupfs",
		"cgroupRoot":               s.cgroupRoot,
		"failCgroupV1":             false,
		"failSwapOn":               false,
		"containerRuntimeEndpoint": "unix://" + s.paths.containerdSocket(),
		"address":                  s.nodeIP.String(),
		"readOnlyPort":             0,
		"healthzBindAddress":       "127.0.0.1",
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": true},
			"webhook":   map[string]any{"enabled": false},
		},
		"authorization":               map[string]any{"mode": "AlwaysAllow"},
		"podLogsDir":                  s.paths.podLogs(),
		"volumePluginDir":             s.paths.path("kubelet", "volume-plugins"),
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		"evictionHard": map[string]string{
			"memory.available": "1Mi", "nodefs.available": "1%", "nodefs.inodesFree": "1%",
			"imagefs.available": "1%", "imagefs.inodesFree": "1%",
		},
		"resolvConf":          "",
		"clusterDNS":          addrStrings(s.clusterDNS),
		"clusterDomain":       ClusterDomain,
		"registerWithTaints":  s.taints,
		"serializeImagePulls": false,
		// Shorter than the defaults so that the test bed notices changes
		// sooner; still what a real node could run with.
		"nodeStatusUpdateFrequency": "4s",
		"syncFrequency":             "10s",
		// A container killed on purpose again and again (the failover
		// benchmark's trials) comes back within seconds instead of
		// after a back-off that doubles up to 5 minutes.
		"crashLoopBackOff": map[string]string{"maxContainerRestartPeriod": "2s"},
		// A test reads a container's whole log (the scale benchmark, the
		// agent's at --v=2): rotated only past 100 MiB.
		"containerLogMaxSize": "100Mi",
	}
	return yaml.Marshal(cfg)
}

// cniConfig is a node's network: the reference bridge plugin on cni0 with
// host-local addresses from the Node's pod CIDRs (one per family), the
// node as the Pods' gateway, no masquerading (pod routes carry pod
// addresses between nodes); then portmap, for the Pods' hostPorts (its
// iptables rules, through iptables-nft, in the node's own namespace).
func cniConfig(name string, podCIDRs []netip.Prefix, ipamDir string) ([]byte, error) {
	var ranges [][]map[string]string
	var routes []map[string]string
	for _, c := range podCIDRs {
		ranges = append(ranges, []map[string]string{{"subnet": c.Masked().String()}})
		dst := "0.0.0.0/0"
		if c.Addr().Is6() {
			dst = "::/0"
		}
		routes = append(routes, map[string]string{"dst": dst})
	}
	cfg := map[string]any{
		"cniVersion": "0.4.0",
		"name":       name,
		"plugins": []any{
			map[string]any{
				"type":        "bridge",
				"bridge":      "cni0",
				"isGateway":   true,
				"ipMasq":      false,
				"hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  ranges,
					"routes":  routes,
					"dataDir": ipamDir,
				},
			},
			map[string]any{
				"type":         "portmap",
				"capabilities": map[string]bool{"portMappings": true},
			},
		},
	}
	return json.MarshalIndent(cfg, "", "  ")
}

func addrStrings(addrs []netip.Addr) []string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = a.String()
	}
	return out
}

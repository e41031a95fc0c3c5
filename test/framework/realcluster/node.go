package realcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/groundcloud/groundcloud/internal/annotation"
	"github.com/groundcloud/groundcloud/test/framework/imagebuild"
	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

// Node is a real Kubernetes node: a lab host running containerd and a
// kubelet in the host's network namespace and in a mount namespace of the
// node's own. Its exported fields are read-only.
type Node struct {
	// Name is the Node's name and the lab host's.
	Name string
	Host *netlab.Host
	// LoadBalancer says the node is a load-balancer host: labelled
	// annotation.LoadBalancerHostLabel=true, where the agent DaemonSet
	// runs.
	LoadBalancer bool
	// Dir holds the node's state and logs (containerd.log, kubelet.log).
	Dir string

	paths      nodePaths
	cgroupRoot string
	// apiRelay carries the node's connections to the apiserver (see
	// Cluster.APIServer).
	apiRelay *netlab.Forwarder
	// serviceRoutes are the Service CIDRs routed to the node's interface
	// (processes on the host network reach Services by kube-proxy's DNAT
	// in OUTPUT, after a route lookup that must succeed first: a node has
	// no default route here).
	serviceRoutes []netip.Prefix
	holder        *netlab.Process
	containerd    *netlab.Process
	kubelet       *netlab.Process
	// kubeletPaused: SetKubeletPaused stopped the kubelet (SIGSTOP).
	kubeletPaused bool
	// stopped: the node's processes are gone (Leave or Close).
	stopped bool
}

// holderScript runs first in the node's new mount namespace (private: no
// mount propagates to or from the machine's) and keeps it alive. It covers
// the host paths that kubelet and the containerd shims use whatever they
// are told, so that nodes neither collide nor leave anything behind:
// /var/lib/kubelet/device-plugins, /var/log/containers and the shims'
// sockets under /run/containerd. Nothing else of the machine's /run,
// /var/lib and /var/log is needed inside a node.
const holderScript = `set -e
for d in /run /var/lib /var/log; do mount -t tmpfs -o mode=0755 groundcloud-node "$d"; done
mkdir -p /var/lib/kubelet/device-plugins /var/log/containers /var/log/pods /run/containerd
echo "node: mount namespace ready"
exec sleep infinity
`

// SetLink plugs or pulls the node's cable: its link to the lab, and with
// it the way its kubelet, kube-proxy and host-network Pods reach the
// apiserver, which the test bed relays outside the lab.
//
// The kernel drops the routes through a link that goes down; when it comes
// back the node's own routes are added again, as a machine's network
// configuration would (pod routes are groundcloud-router's).
func (n *Node) SetLink(up bool) error {
	if err := n.Host.SetLink(up); err != nil {
		return err
	}
	n.apiRelay.SetBlocked(!up)
	if up {
		return n.addServiceRoutes()
	}
	return nil
}

func (n *Node) addServiceRoutes() error {
	for _, p := range n.serviceRoutes {
		if err := n.Host.AddRoute(p, n.Host.Iface); err != nil && !errors.Is(err, unix.EEXIST) {
			return err
		}
	}
	return nil
}

// SetPower turns the node's machine off or on, as far as the cluster can
// tell: off stops its kubelet (no more heartbeats; its containers freeze
// with it and answer nothing) and pulls its cable; on plugs the cable and
// lets the kubelet run again, which then finds what was decided without
// it (Pods deleted meanwhile are stopped).
func (n *Node) SetPower(on bool) error {
	if on {
		return errors.Join(n.SetLink(true), n.SetKubeletPaused(false))
	}
	return errors.Join(n.SetKubeletPaused(true), n.SetLink(false))
}

// ContainerdSocket is the node's containerd socket (CRI and containerd's
// own API).
func (n *Node) ContainerdSocket() string { return n.paths.containerdSocket() }

// Logs are the node's log files.
func (n *Node) Logs() []string {
	return []string{filepath.Join(n.Dir, "containerd.log"), filepath.Join(n.Dir, "kubelet.log")}
}

// PodLogs are the log files the kubelet keeps of the node's containers
// ("<namespace>_<pod>_<uid>/<container>/<restart>.log" under the node's
// directory), which stay readable when its API is not: a test's failure
// report reads them.
func (n *Node) PodLogs() []string {
	logs, _ := filepath.Glob(filepath.Join(n.paths.podLogs(), "*", "*", "*.log"))
	return logs
}

// start brings the node up to a running kubelet: directories, the mount
// namespace, containerd with the images imported, then the kubelet.
func (n *Node) start(ctx context.Context, c *Cluster) error {
	for _, d := range []string{"containerd", "kubelet/root", "cni/net.d", "cni/ipam", "pods"} {
		if err := os.MkdirAll(n.paths.path(d), 0o755); err != nil {
			return err
		}
	}
	if err := createCgroup(n.cgroupRoot); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	if err := n.startHolder(ctx); err != nil {
		return err
	}
	if err := n.startContainerd(ctx, c.Images.Pause.Ref); err != nil {
		return err
	}
	if err := n.importImages(ctx, c.Images.all()); err != nil {
		return err
	}
	return n.startKubelet(c)
}

func (n *Node) startHolder(ctx context.Context) error {
	cmd := n.Host.Nsenter(context.Background(), nil, "unshare", "--mount", "--propagation", "private", "--", "sh", "-c", holderScript)
	p, err := n.Host.StartCmd(context.Background(), filepath.Join(n.Dir, "mounts.log"), cmd)
	if err != nil {
		return fmt.Errorf("node %s: mount namespace: %w", n.Name, err)
	}
	n.holder = p
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := p.WaitForOutput(wctx, "node: mount namespace ready"); err != nil {
		return fmt.Errorf("node %s: mount namespace: %w", n.Name, err)
	}
	return nil
}

// inNode runs name in the node's network and mount namespaces, as the
// lab's process (stopped with the lab, killed if this process dies).
func (n *Node) inNode(logName, name string, args ...string) (*netlab.Process, error) {
	flags := []string{"--mount=/proc/" + strconv.Itoa(n.holder.Pid()) + "/ns/mnt"}
	cmd := n.Host.Nsenter(context.Background(), flags, name, args...)
	return n.Host.StartCmd(context.Background(), filepath.Join(n.Dir, logName), cmd)
}

func (n *Node) startContainerd(ctx context.Context, pauseImage string) error {
	if err := os.WriteFile(n.paths.containerdConfig(), []byte(containerdConfig(n.paths, pauseImage, cniBinDir)), 0o644); err != nil {
		return err
	}
	p, err := n.inNode("containerd.log", "containerd", "--config", n.paths.containerdConfig())
	if err != nil {
		return fmt.Errorf("node %s: containerd: %w", n.Name, err)
	}
	n.containerd = p
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := p.WaitForOutput(wctx, "containerd successfully booted"); err != nil {
		return fmt.Errorf("node %s: containerd: %w", n.Name, err)
	}
	return nil
}

// importImages loads the image archives into containerd's k8s.io
// namespace, where the CRI plugin finds them.
func (n *Node) importImages(ctx context.Context, imgs []imagebuild.Image) error {
	for _, img := range imgs {
		if _, err := n.Ctr(ctx, "images", "import", img.Archive); err != nil {
			return fmt.Errorf("node %s: import %s: %w", n.Name, img.Ref, err)
		}
	}
	return nil
}

// Ctr runs containerd's ctr against the node's containerd, in the k8s.io
// namespace (the CRI plugin's), and returns its output. It runs in the
// node's mount namespace, where the shims look for the FIFOs ctr makes.
func (n *Node) Ctr(ctx context.Context, args ...string) ([]byte, error) {
	full := append([]string{"--mount=/proc/" + strconv.Itoa(n.holder.Pid()) + "/ns/mnt", "--",
		"ctr", "--address", n.ContainerdSocket(), "--namespace", "k8s.io"}, args...)
	cmd := exec.CommandContext(ctx, "nsenter", full...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out.Bytes(), nil
}

// KillContainer sends SIGKILL to a container's processes (id as in a
// Pod's containerStatuses, with or without "containerd://"), as a crash
// would end it; the kubelet then restarts it as the Pod says.
func (n *Node) KillContainer(ctx context.Context, id string) error {
	id = strings.TrimPrefix(id, "containerd://")
	_, err := n.Ctr(ctx, "tasks", "kill", "--all", "--signal", "SIGKILL", id)
	return err
}

// SetKubeletPaused freezes the node's kubelet (SIGSTOP) or lets it run
// again (SIGCONT), as a kubelet that hangs would: the containers it runs go
// on, and one that exits is not restarted until the kubelet runs again (a
// crash-looping container, seen at a given moment). The node is stopped
// with its kubelet running again.
func (n *Node) SetKubeletPaused(paused bool) error {
	if n.kubelet == nil {
		return fmt.Errorf("node %s: no kubelet", n.Name)
	}
	sig := unix.SIGCONT
	if paused {
		sig = unix.SIGSTOP
	}
	if err := unix.Kill(n.kubelet.Pid(), sig); err != nil {
		return fmt.Errorf("node %s: %v to the kubelet: %w", n.Name, sig, err)
	}
	n.kubeletPaused = paused
	return nil
}

// ContainerPID is the host pid of a container's main process.
func (n *Node) ContainerPID(ctx context.Context, id string) (int, error) {
	id = strings.TrimPrefix(id, "containerd://")
	out, err := n.Ctr(ctx, "tasks", "ls")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == id {
			return strconv.Atoi(f[1])
		}
	}
	return 0, fmt.Errorf("node %s: no task %s", n.Name, id)
}

func (n *Node) startKubelet(c *Cluster) error {
	dns, err := dnsAddresses(c.Opts.ServiceCIDR)
	if err != nil {
		return err
	}
	nodeAddrs := c.nodeAddrs(n.Host)
	s := kubeletSettings{paths: n.paths, cgroupRoot: n.cgroupRoot, nodeIP: nodeAddrs[0], clusterDNS: dns}
	// The load-balancer host label is the administrator's to set
	// (Cluster.labelLoadBalancerHost): the kubelet refuses a
	// node-restriction.kubernetes.io/ key in --node-labels, and
	// NodeRestriction would refuse it too. A kubelet may register with
	// taints.
	var labels []string
	if n.LoadBalancer && !c.Opts.SharedLBHosts {
		s.taints = []corev1.Taint{{Key: annotation.LoadBalancerHostTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
		labels = append(labels, corev1.LabelNodeExcludeBalancers+"=true")
	}
	cfg, err := kubeletConfig(s)
	if err != nil {
		return err
	}
	if err := os.WriteFile(n.paths.kubeletConfig(), cfg, 0o644); err != nil {
		return err
	}
	if err := c.CP.WriteKubeconfig(n.paths.kubeletKubeconfig(), nodeUser(n.Name), c.apiserverURL()); err != nil {
		return err
	}
	var nodeIPs []string
	for _, a := range nodeAddrs {
		nodeIPs = append(nodeIPs, a.String())
	}
	args := []string{
		"--config=" + n.paths.kubeletConfig(),
		"--kubeconfig=" + n.paths.kubeletKubeconfig(),
		"--root-dir=" + n.paths.kubeletRoot(),
		"--hostname-override=" + n.Name,
		"--node-ip=" + strings.Join(nodeIPs, ","),
		"--cloud-provider=external",
		"--v=1",
	}
	if len(labels) > 0 {
		args = append(args, "--node-labels="+strings.Join(labels, ","))
	}
	p, err := n.inNode("kubelet.log", filepath.Join(c.Opts.ToolsDir, "kubelet"), args...)
	if err != nil {
		return fmt.Errorf("node %s: kubelet: %w", n.Name, err)
	}
	n.kubelet = p
	return nil
}

// stop ends the node's processes: the kubelet, then every process of its
// Pods (by their cgroups), then containerd and its shims, then the mount
// namespace. It is idempotent.
func (n *Node) stop() error {
	if n.stopped {
		return nil
	}
	n.stopped = true
	var errs []error
	if n.kubeletPaused {
		errs = append(errs, n.SetKubeletPaused(false))
	}
	for _, p := range []*netlab.Process{n.kubelet} {
		if p != nil {
			_ = p.Stop()
		}
	}
	errs = append(errs, killCgroup(n.cgroupRoot))
	for _, p := range []*netlab.Process{n.containerd, n.holder} {
		if p != nil {
			_ = p.Stop()
		}
	}
	return errors.Join(errs...)
}

// writeCNIConfig gives the node its network once it has pod CIDRs.
func (n *Node) writeCNIConfig(podCIDRs []netip.Prefix) error {
	data, err := cniConfig("groundcloud-bed", podCIDRs, n.paths.path("cni", "ipam"))
	if err != nil {
		return err
	}
	tmp := filepath.Join(n.paths.cniConfDir(), ".10-bridge.conflist")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(n.paths.cniConfDir(), "10-bridge.conflist"))
}

package realcluster

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/groundcloud/groundcloud/test/framework/controlplane"
	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

// cniBinDir is where Debian's containernetworking-plugins installs the
// plugins.
const cniBinDir = "/usr/lib/cni"

// Cluster is a running cluster. Its exported fields are read-only.
type Cluster struct {
	Opts   Options
	CP     *controlplane.ControlPlane
	Client kubernetes.Interface
	Lab    *netlab.Lab
	// Nodes are the load-balancer hosts, then the workers, then the late
	// workers that have joined (Join).
	Nodes []*Node
	// late are the late workers that have not joined yet.
	late []*Node
	// left are the workers that have left (Leave).
	left    []*Node
	Clients map[string]*netlab.Host
	Images  Images
	// APIServer is where nodes and Pods reach the apiserver: the
	// kubernetes Service's endpoint, an address on every node's loopback
	// that the test bed relays to the apiserver on the machine's 127.0.0.1.
	APIServer netip.AddrPort
	// CloudConfig is the controller manager's cloud-config, as stored in
	// Secret kube-system/groundcloud-cloud-config.
	CloudConfig string

	// hostLabel is the label key that places the installed release's
	// agents (see renderInstall).
	hostLabel string

	lock       *HostLock
	hostBefore HostState  // with Options.CheckHost
	mu         sync.Mutex // closers, appended to by nodes starting at once
	closers    []func() error
	// nodeNetns identify the nodes' network namespaces as /proc/<pid>/ns/net
	// reads ("net:[<inode>]"), to find what was left in them. netnsHeld
	// keeps each open until Close has looked: a namespace freed earlier
	// could have its inode number reused by another's (a test running
	// beside the cluster).
	nodeNetns []string
	netnsHeld []*os.File
}

// Start starts a cluster: the control plane with kube-controller-manager
// and kube-scheduler, every node with containerd and a kubelet
// --cloud-provider=external, kube-proxy as a DaemonSet, groundcloud
// installed from deploy/ (and deploy/router/) as a user installs it. It
// returns once every node is Ready and initialised by groundcloud's
// controller manager and every component runs. On error everything
// started is removed.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	opts = opts.withDefaults()
	if opts.Repo == "" {
		if opts.Repo, err = controlplane.RepoRoot(); err != nil {
			return nil, err
		}
	}
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	c := &Cluster{Opts: opts, Clients: map[string]*netlab.Host{}}
	defer func() {
		if err != nil {
			c.logf("cluster: start failed: %v; the cluster as it was:\n%s", err, c.describe())
			err = errors.Join(err, c.Close())
		}
	}()
	began := time.Now()
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, err
	}
	if c.lock, err = LockHost(ctx, opts.Dir); err != nil {
		return nil, err
	}
	if opts.CheckHost {
		if c.hostBefore, err = TakeHostState(ctx, c.mine); err != nil {
			return nil, err
		}
	}
	if _, err := clusterSysctls.Save(globalSysctls...); err != nil {
		return nil, err
	}
	c.logf("building images from deploy/images/ and the test bed's own")
	step := time.Now()
	if c.Images, err = buildImages(ctx, opts.Repo, opts.ToolsDir, filepath.Join(opts.Dir, "images")); err != nil {
		return nil, err
	}
	c.logf("built %d images in %v", len(c.Images.all()), time.Since(step).Round(time.Second))
	if err := c.startHosts(ctx); err != nil {
		return nil, err
	}
	if err := c.startControlPlane(ctx); err != nil {
		return nil, err
	}
	if err := c.startNodes(ctx); err != nil {
		return nil, err
	}
	if err := c.install(ctx); err != nil {
		return nil, err
	}
	if err := c.waitReady(ctx); err != nil {
		return nil, err
	}
	c.logf("cluster ready in %v", time.Since(began).Round(time.Second))
	return c, nil
}

func (c *Cluster) logf(format string, args ...any) { c.Opts.Logf(format, args...) }

// nodeAddrs are h's lab addresses of the cluster's families, in
// ClusterCIDR's order: the node's IPs, the first its primary one.
func (c *Cluster) nodeAddrs(h *netlab.Host) []netip.Addr {
	cidrs, _ := parseCIDRs("", c.Opts.ClusterCIDR)
	var out []netip.Addr
	for _, p := range cidrs {
		if p.Addr().Is4() {
			out = append(out, h.Addr4)
		} else {
			out = append(out, h.Addr6)
		}
	}
	return out
}

func (c *Cluster) apiserverURL() string { return "https://" + c.APIServer.String() }

// startHosts makes the lab: a host per node (forwarding on, as on any
// node) and the clients.
func (c *Cluster) startHosts(ctx context.Context) error {
	o := c.Opts
	l, err := o.Topology.NewLab(ctx)
	if err != nil {
		return err
	}
	c.Lab = l
	c.closers = append(c.closers, l.Close)
	prefix := "/groundcloud." + l.Prefix
	add := func(name string, lb bool) error {
		h, err := l.AddHost(ctx, name, netlab.HostOptions{Forwarding: true})
		if err != nil {
			return err
		}
		f, err := os.Open(filepath.Join("/run/netns", h.Netns))
		if err != nil {
			return err
		}
		c.netnsHeld = append(c.netnsHeld, f)
		var st unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &st); err != nil {
			return err
		}
		c.nodeNetns = append(c.nodeNetns, fmt.Sprintf("net:[%d]", st.Ino))
		for _, a := range o.ExtraAddresses[name] {
			subnet := o.Subnet4
			if a.Is6() {
				subnet = o.Subnet6
			}
			if !subnet.Contains(a) {
				return fmt.Errorf("ExtraAddresses of %s: %s is not in the lab's subnet %s", name, a, subnet)
			}
			if err := h.AddAddress(h.Iface, netip.PrefixFrom(a, subnet.Bits())); err != nil {
				return err
			}
		}
		dir := filepath.Join(o.Dir, "nodes", name)
		c.Nodes = append(c.Nodes, &Node{
			Name: name, Host: h, LoadBalancer: lb, Dir: dir,
			paths: nodePaths{dir: dir}, cgroupRoot: prefix + "/" + name,
		})
		return nil
	}
	for i := 1; i <= o.LBHosts; i++ {
		if err := add("lb-"+strconv.Itoa(i), true); err != nil {
			return err
		}
	}
	for i := 1; i <= o.Workers+o.LateWorkers; i++ {
		if err := add("node-"+strconv.Itoa(i), false); err != nil {
			return err
		}
	}
	for name := range o.ExtraAddresses {
		if !slices.ContainsFunc(c.Nodes, func(n *Node) bool { return n.Name == name }) {
			return fmt.Errorf("ExtraAddresses: no node %s", name)
		}
	}
	// The late workers wait outside Nodes until they join.
	k := o.LBHosts + o.Workers
	c.Nodes, c.late = c.Nodes[:k:k], c.Nodes[k:]
	clients, unlink, err := o.Topology.AddClients(ctx, l)
	if err != nil {
		return err
	}
	c.Clients = clients
	if unlink != nil {
		c.closers = append(c.closers, unlink)
	}
	return nil
}

// nodeUser is the apiserver user of a node's kubelet, which the Node
// authorizer recognises.
func nodeUser(name string) string { return "system:node:" + name }

func (c *Cluster) startControlPlane(ctx context.Context) error {
	users := []controlplane.User{}
	for _, n := range slices.Concat(c.Nodes, c.late) {
		users = append(users, controlplane.User{Name: nodeUser(n.Name), Groups: []string{"system:nodes"}})
	}
	c.logf("starting etcd, kube-apiserver, kube-controller-manager and kube-scheduler")
	// The control plane's processes share the CPU with the nodes as one
	// more machine would, in a cgroup beside the nodes' (see
	// controlPlaneCgroup).
	cg := controlPlaneCgroup(c.Lab.Prefix)
	if err := createCgroup(cg); err != nil {
		return err
	}
	if err := setCPUWeight(filepath.Dir(cg), len(c.Nodes)+len(c.late)+1); err != nil {
		return err
	}
	c.closers = append(c.closers, func() error { return killCgroup(cg) })
	egress, proxy, err := c.startEgress(filepath.Join(c.Opts.Dir, "egress"))
	if err != nil {
		return err
	}
	c.closers = append(c.closers, proxy.close)
	cp, err := controlplane.Start(ctx, controlplane.Options{
		BinDir:      c.Opts.ToolsDir,
		Dir:         filepath.Join(c.Opts.Dir, "control-plane"),
		ServiceCIDR: c.Opts.ServiceCIDR,
		Users:       users,
		ExtraAPIServerArgs: append([]string{
			"--advertise-address=" + c.Opts.APIServerAddress.String(),
			"--allow-privileged=true", // kube-proxy
			"--kubelet-preferred-address-types=InternalIP,Hostname",
			// kubectl exec and logs, proxy: see egressProxy.
			"--egress-selector-config-file=" + egress,
		}, c.Opts.ExtraAPIServerArgs...),
		ControllerManager: &controlplane.ControllerManagerOptions{ClusterCIDR: c.Opts.ClusterCIDR, ExtraArgs: c.Opts.ExtraControllerManagerArgs},
		Scheduler:         true,
		Logf:              c.Opts.Logf,
		Started:           func(pid int) error { return joinCPUCgroup(cg, pid) },
	})
	if err != nil {
		return err
	}
	c.CP = cp
	c.Client = cp.Client()
	c.closers = append(c.closers, cp.Stop)
	port, err := strconv.Atoi(cp.URL[len("https://127.0.0.1:"):])
	if err != nil {
		return fmt.Errorf("apiserver URL %s: %w", cp.URL, err)
	}
	c.APIServer = netip.AddrPortFrom(c.Opts.APIServerAddress, uint16(port))
	return nil
}

// startNodes gives every node its way to the apiserver and to Services,
// then starts them all at once (the late workers at Join).
func (c *Cluster) startNodes(ctx context.Context) error {
	nodes := c.Nodes
	c.logf("starting containerd and kubelet on %d nodes", len(nodes))
	began := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(nodes))
	for i, n := range nodes {
		wg.Go(func() { errs[i] = c.startNode(ctx, n) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	c.logf("%d kubelets started, images imported, in %v", len(nodes), time.Since(began).Round(time.Second))
	return nil
}

// startNode gives a node its way to the apiserver and to Services and
// starts its containerd and kubelet.
func (c *Cluster) startNode(ctx context.Context, n *Node) error {
	h := n.Host
	if err := h.AddAddress("lo", netip.PrefixFrom(c.APIServer.Addr(), c.APIServer.Addr().BitLen())); err != nil {
		return err
	}
	f, err := h.Forward(context.Background(), c.APIServer.String(), c.CP.URL[len("https://"):])
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.closers = append(c.closers, f.Close, n.stop)
	c.mu.Unlock()
	n.apiRelay = f
	// Processes on the host network reach Services by kube-proxy's DNAT in
	// OUTPUT, after a route lookup that must succeed first: a node has no
	// default route here.
	n.serviceRoutes, _ = parseCIDRs("", c.Opts.ServiceCIDR)
	if err := n.addServiceRoutes(); err != nil {
		return err
	}
	return n.start(ctx, c)
}

// Join starts a late worker (Options.LateWorkers): its containerd and
// kubelet, which registers the Node; it returns once the Node is Ready and
// initialised by groundcloud's controller manager and kube-proxy and
// groundcloud-router run on it.
func (c *Cluster) Join(ctx context.Context, name string) error {
	i := slices.IndexFunc(c.late, func(n *Node) bool { return n.Name == name })
	if i < 0 {
		return fmt.Errorf("cluster: %s is not a late worker that has not joined", name)
	}
	n := c.late[i]
	began := time.Now()
	if err := c.startNode(ctx, n); err != nil {
		return err
	}
	c.late = slices.Delete(c.late, i, i+1)
	c.Nodes = append(c.Nodes, n)
	cidrs, err := c.waitPodCIDRs(ctx, n.Name)
	if err != nil {
		return err
	}
	if err := n.writeCNIConfig(cidrs); err != nil {
		return err
	}
	if err := c.poll(ctx, "nodes Ready and initialised", c.nodesReady); err != nil {
		return err
	}
	if err := c.poll(ctx, "components running", c.componentsReady); err != nil {
		return err
	}
	c.logf("%s joined in %v", name, time.Since(began).Round(time.Second))
	return nil
}

// Leave takes a worker out of the cluster as a machine that is retired:
// it shuts down (its kubelet, every process of its Pods, containerd) and
// its Node is deleted, as an administrator would after draining it. Its
// lab host stays, answering nothing; the inventory still lists it.
func (c *Cluster) Leave(ctx context.Context, name string) error {
	i := slices.IndexFunc(c.Nodes, func(n *Node) bool { return n.Name == name })
	if i < 0 || c.Nodes[i].LoadBalancer {
		return fmt.Errorf("cluster: %s is not a worker of the cluster", name)
	}
	n := c.Nodes[i]
	if err := n.stop(); err != nil {
		return fmt.Errorf("cluster: %s: %w", name, err)
	}
	c.Nodes = slices.Delete(c.Nodes, i, i+1)
	c.left = append(c.left, n)
	if err := c.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("cluster: delete Node %s: %w", name, err)
	}
	c.logf("%s left", name)
	return nil
}

// RoutePodsTo gives lab host h a route to every node's pod CIDRs through
// that node, so that Pods reach h (a BMC, say) as they would a management
// network the nodes route to.
func (c *Cluster) RoutePodsTo(ctx context.Context, h *netlab.Host) error {
	nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, n := range nodes.Items {
		node := c.Node(n.Name)
		if node == nil {
			continue
		}
		for _, cidr := range n.Spec.PodCIDRs {
			p, err := netip.ParsePrefix(cidr)
			if err != nil {
				return fmt.Errorf("node %s: pod CIDR %q: %w", n.Name, cidr, err)
			}
			via := node.Host.Addr4
			if p.Addr().Is6() {
				via = node.Host.Addr6
			}
			if out, err := h.Command(ctx, "ip", "route", "replace", p.String(), "via", via.String()).CombinedOutput(); err != nil {
				return fmt.Errorf("route %s via %s in %s: %w: %s", p, via, h.Name, err, out)
			}
		}
	}
	return nil
}

// Node returns the node with the given name (a late worker too), or nil.
func (c *Cluster) Node(name string) *Node {
	for _, n := range slices.Concat(c.Nodes, c.late, c.left) {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// Logs lists the log files of the control plane and the nodes.
func (c *Cluster) Logs() []string {
	var logs []string
	if c.CP != nil {
		logs = append(logs, c.CP.Logs()...)
	}
	for _, n := range c.Nodes {
		logs = append(logs, n.Logs()...)
	}
	return logs
}

// Close stops everything Start started, in reverse order, removes the
// cgroups of the nodes, puts back the machine-wide settings the kubelets
// changed and releases the machine-wide lock. It is idempotent.
func (c *Cluster) Close() error {
	var errs []error
	for i := len(c.closers) - 1; i >= 0; i-- {
		errs = append(errs, c.closers[i]())
	}
	c.closers = nil
	if c.lock != nil {
		errs = append(errs, RestoreSysctls())
		if c.hostBefore != nil {
			errs = append(errs, c.checkHost())
		}
		c.lock.Unlock()
		c.lock = nil
	}
	for _, f := range c.netnsHeld {
		f.Close()
	}
	c.netnsHeld = nil
	return errors.Join(errs...)
}

// mine picks this cluster's named network namespaces among the machine's.
func (c *Cluster) mine(netns string) bool { return strings.HasPrefix(netns, c.Opts.Prefix+"-") }

// checkHost reports how the machine differs from what Start found, and
// what of the cluster is left.
func (c *Cluster) checkHost() error {
	after, err := TakeHostState(context.Background(), c.mine)
	if err != nil {
		return err
	}
	diffs := append(c.hostBefore.Diff(after), c.Leftovers()...)
	if len(diffs) > 0 {
		return fmt.Errorf("the machine is not as the cluster found it:\n  %s", strings.Join(diffs, "\n  "))
	}
	return nil
}

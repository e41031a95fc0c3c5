package realcluster

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"

	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

// Defaults of Options.
const (
	DefaultClusterCIDR = "10.244.0.0/16,fd00:10:244::/56"
	DefaultServiceCIDR = "10.96.0.0/16,fd00:10:96::/112"
)

// DefaultAPIServerAddress is where kubelets, kube-proxy and Pods reach the
// apiserver: an address on every node's loopback, relayed to the apiserver
// on the machine's 127.0.0.1 (see Cluster.APIServer).
var DefaultAPIServerAddress = netip.MustParseAddr("10.200.0.1")

// DefaultAPIServerAddress6 is DefaultAPIServerAddress of an IPv6-only
// cluster: the apiserver's address must be of its Services' first family.
var DefaultAPIServerAddress6 = netip.MustParseAddr("fd00:10:200::1")

// Options configure a cluster. Zero values take the defaults noted.
type Options struct {
	// Dir holds the cluster's state, configs and logs; required. It must
	// not be under /run, /var/lib or /var/log, which each node covers with
	// a tmpfs of its own.
	Dir string
	// ToolsDir holds the pinned Kubernetes binaries (controlplane.ToolsDir).
	ToolsDir string
	// Repo is the groundcloud checkout: deploy/ and the sources of the
	// images (default controlplane.RepoRoot()).
	Repo string

	// Topology: the lab, its load-balancer hosts (named lb-N), clients and
	// pool ranges, and the optional root link.
	netlab.Topology

	// Workers (default 2) and Topology.LBHosts are the nodes, named
	// node-N and lb-N. Load-balancer hosts are labelled
	// annotation.LoadBalancerHostLabel=true (by the administrator once
	// registered) and, unless SharedLBHosts, tainted
	// annotation.LoadBalancerHostTaint (NoSchedule, as they register) and
	// labelled
	// node.kubernetes.io/exclude-from-external-load-balancers: dedicated
	// hosts, as docs/install.md describes.
	Workers       int
	SharedLBHosts bool
	// LateWorkers are more workers (named after the others) whose machines
	// exist from the start, in the lab and in the inventory, but whose
	// containerd and kubelet start only at Cluster.Join: nodes joining a
	// running cluster.
	LateWorkers int
	// ExtraAddresses are more addresses of the lab's subnets on a node's
	// interface, by node name, added when its host is made, before its
	// kubelet and kube-proxy start: a machine with several addresses.
	ExtraAddresses map[string][]netip.Addr
	// ExtraAPIServerArgs are added to kube-apiserver's flags (a wider
	// --service-node-port-range, say; see controlplane.Options).
	ExtraAPIServerArgs []string
	// ExtraControllerManagerArgs are added to kube-controller-manager's
	// flags (see controlplane.ControllerManagerOptions).
	ExtraControllerManagerArgs []string
	// NodePortAddresses is kube-proxy's nodePortAddresses: CIDRs of the
	// node addresses where it serves NodePorts, or "primary" (empty: its
	// default, which in nftables mode is the node's primary addresses).
	NodePortAddresses []string
	// DefaultPool are more keys of pool "default" ("forwarding = proxy",
	// "announce = bgp", ...), one per line.
	DefaultPool string
	// BMCCredentials, when set, are the keys of Secret
	// kube-system/groundcloud-bmc-credentials, which the controller
	// manager mounts at /etc/groundcloud-bmc through the component
	// deploy/controller-manager/bmc-credentials (docs/controller-manager.md).
	BMCCredentials map[string][]byte
	// Helm installs groundcloud as the chart's users do: `helm upgrade
	// --install` of Repo's charts/groundcloud, release "groundcloud" in
	// kube-system, with values that say what the kustomize overlay says
	// (local images, the interface facing clients, --cluster-cidr, the
	// router), instead of kubectl apply -k over deploy/.
	Helm bool
	// ExtraCloudConfig is appended to the cloud-config.
	ExtraCloudConfig string
	// CloudConfigFor, when set, returns more cloud-config, appended after
	// ExtraCloudConfig once the hosts exist and their addresses are known
	// (a BGP peer on a client host, say).
	CloudConfigFor func(c *Cluster) string
	// ClusterCIDR and ServiceCIDR: one CIDR or an IPv4 and an IPv6 one
	// (the defaults are dual-stack).
	ClusterCIDR, ServiceCIDR string
	// APIServerAddress: see DefaultAPIServerAddress.
	APIServerAddress netip.Addr
	// CheckHost makes Start record the machine's state (TakeHostState)
	// under the machine-wide lock, before it changes anything, and Close
	// compare it with the state after the teardown, still under the lock:
	// every difference, and whatever of the cluster is left (Leftovers), is
	// an error of Close.
	CheckHost bool

	// Logf receives progress lines (default: none).
	Logf func(format string, args ...any)
}

func (o Options) withDefaults() Options {
	if o.Prefix == "" {
		o.Prefix = netlab.RunPrefix(netlab.DefaultFamily)
	}
	if o.Workers == 0 {
		o.Workers = 2
	}
	o.Topology = o.Topology.WithDefaults()
	if o.ClusterCIDR == "" {
		o.ClusterCIDR = DefaultClusterCIDR
	}
	if o.ServiceCIDR == "" {
		o.ServiceCIDR = DefaultServiceCIDR
	}
	if !o.APIServerAddress.IsValid() {
		o.APIServerAddress = DefaultAPIServerAddress
		if svc, err := parseCIDRs("", o.ServiceCIDR); err == nil && svc[0].Addr().Is6() {
			o.APIServerAddress = DefaultAPIServerAddress6
		}
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return o
}

// coveredDirs are covered by a tmpfs in every node's mount namespace.
var coveredDirs = []string{"/run", "/var/lib", "/var/log"}

// Validate reports every problem at once.
func (o Options) Validate() error {
	var errs []error
	if o.Dir == "" || !filepath.IsAbs(o.Dir) {
		errs = append(errs, fmt.Errorf("Dir %q: want an absolute path", o.Dir))
	}
	if o.ToolsDir == "" {
		errs = append(errs, errors.New("ToolsDir is required"))
	}
	for name, dir := range map[string]string{"Dir": o.Dir, "ToolsDir": o.ToolsDir, "Repo": o.Repo} {
		for _, c := range coveredDirs {
			if dir == c || strings.HasPrefix(dir, c+"/") {
				errs = append(errs, fmt.Errorf("%s %s: nodes cannot see %s (each covers it with a tmpfs)", name, dir, c))
			}
		}
	}
	if o.Workers < 1 || o.Workers > 20 {
		errs = append(errs, fmt.Errorf("Workers %d: want 1 to 20", o.Workers))
	}
	if o.LateWorkers < 0 || o.Workers+o.LateWorkers > 20 {
		errs = append(errs, fmt.Errorf("LateWorkers %d: want 0 to %d", o.LateWorkers, 20-o.Workers))
	}
	if o.LBHosts < 1 || o.LBHosts > 8 {
		errs = append(errs, fmt.Errorf("LBHosts %d: want 1 to 8", o.LBHosts))
	}
	for _, a := range o.NodePortAddresses {
		if _, err := netip.ParsePrefix(a); err != nil && a != "primary" {
			errs = append(errs, fmt.Errorf("NodePortAddresses %q: want a CIDR or \"primary\"", a))
		}
	}
	cidrs, err := parseCIDRs("ClusterCIDR", o.ClusterCIDR)
	errs = append(errs, err)
	svc, err := parseCIDRs("ServiceCIDR", o.ServiceCIDR)
	errs = append(errs, err)
	if !slices.Equal(families(cidrs), families(svc)) {
		errs = append(errs, fmt.Errorf("ClusterCIDR %s and ServiceCIDR %s: want the same families, in the same order", o.ClusterCIDR, o.ServiceCIDR))
	}
	// kube-apiserver refuses an advertise address of another family than
	// the first service CIDR's ("service IP family must match public
	// address family").
	if len(svc) > 0 && o.APIServerAddress.Is4() != svc[0].Addr().Is4() {
		errs = append(errs, fmt.Errorf("APIServerAddress %s: want an address of ServiceCIDR %s's first family", o.APIServerAddress, o.ServiceCIDR))
	}
	for _, p := range append(append(cidrs, svc...), o.Subnet4, o.Subnet6) {
		if p.Contains(o.APIServerAddress) {
			errs = append(errs, fmt.Errorf("APIServerAddress %s is in %s", o.APIServerAddress, p))
		}
	}
	return errors.Join(errs...)
}

// parseCIDRs parses one CIDR, or an IPv4 and an IPv6 one.
func parseCIDRs(name, s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		p, err := netip.ParsePrefix(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, p.Masked())
	}
	if len(out) > 2 || (len(out) == 2 && out[0].Addr().Is4() == out[1].Addr().Is4()) {
		return nil, fmt.Errorf("%s %s: want one CIDR, or an IPv4 and an IPv6 one", name, s)
	}
	return out, nil
}

// families are the address families of prefixes, in order: true for IPv4.
func families(prefixes []netip.Prefix) []bool {
	out := make([]bool, 0, len(prefixes))
	for _, p := range prefixes {
		out = append(out, p.Addr().Is4())
	}
	return out
}

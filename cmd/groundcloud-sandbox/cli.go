package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/groundcloud/groundcloud/test/framework/controlplane"
	"github.com/groundcloud/groundcloud/test/framework/frr"
	"github.com/groundcloud/groundcloud/test/framework/netlab"
	"github.com/groundcloud/groundcloud/test/framework/realcluster"
	"github.com/groundcloud/groundcloud/test/framework/redfish"
)

// Names of what the sandbox creates, so that `down` finds them.
const (
	labPrefix = "gcsandbox"
	rootLink  = "gcsandbox0"
)

type upOptions struct {
	dir     string
	workers int
	lbHosts int
	pool4   string
	subnet4 string
	subnet6 string
	bgp     bool
	bmc     bool
}

// NewCommand returns the groundcloud-sandbox command.
func NewCommand() *cobra.Command {
	dir := "/tmp/groundcloud-sandbox"
	root := &cobra.Command{
		Use:          "groundcloud-sandbox",
		Short:        "A real Kubernetes cluster with groundcloud installed, on this machine, in network namespaces",
		SilenceUsage: true,
	}
	root.PersistentFlags().StringVar(&dir, "dir", dir, "state directory: logs, kubeconfig, the nodes' state (not under /run, /var/lib or /var/log)")

	o := &upOptions{}
	up := &cobra.Command{
		Use:   "up",
		Short: "Start the sandbox and stay in the foreground until Ctrl-C",
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.dir = dir
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return up(ctx, o)
		},
	}
	up.Flags().IntVar(&o.workers, "nodes", 2, "worker nodes (each a kubelet with containerd)")
	up.Flags().IntVar(&o.lbHosts, "lb-hosts", 1, "load-balancer hosts: Nodes running the groundcloud-agent DaemonSet")
	up.Flags().StringVar(&o.subnet4, "subnet", "", "IPv4 subnet of the sandbox network (default: the first of 198.51.100.0/24, 203.0.113.0/24, 100.127.200.0/24 that no route of this machine overlaps)")
	up.Flags().StringVar(&o.subnet6, "subnet6", "2001:db8:5a::/64", "IPv6 subnet of the sandbox network")
	up.Flags().StringVar(&o.pool4, "pool", "", "IPv4 range of the address pool (default: .200-.219 of the subnet)")
	up.Flags().BoolVar(&o.bmc, "bmc", false, "add a Redfish BMC (sushy-tools' emulator) for the workers, which they follow when powered off or on, with bmc-out-of-service = taint (docs/controller-manager.md)")
	up.Flags().BoolVar(&o.bgp, "bgp", false, "add a router (FRR) that the load-balancer hosts peer with over BGP, a client behind it, and a pool announced over BGP (docs/bgp.md); at least 2 load-balancer hosts")

	down := &cobra.Command{
		Use:   "down",
		Short: "Remove a sandbox: stop a running one, or clean up after a crashed one",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return Down(dir, os.Stdout)
		},
	}
	root.AddCommand(up, down)
	return root
}

func progress(format string, args ...any) {
	fmt.Printf("==> "+format+"\n", args...)
}

// stateDir makes the sandbox's state directory, or checks the one there:
// a directory (not a link) of this user's that no one else may write, so
// that no other local user can plant a link or swap a file the sandbox
// reads, writes or removes as root.
func stateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("state directory %s is not a directory (a link?): remove it", dir)
	case !ok || int(st.Uid) != os.Geteuid():
		return fmt.Errorf("state directory %s belongs to another user: remove it", dir)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("state directory %s is writable by others (mode %v): remove it", dir, fi.Mode().Perm())
	}
	return nil
}

func up(ctx context.Context, o *upOptions) (err error) {
	if os.Geteuid() != 0 {
		return errors.New("the sandbox creates network namespaces, nodes and a link into them: run it as root")
	}
	if err := stateDir(o.dir); err != nil {
		return err
	}
	unlock, err := lock(o.dir)
	if err != nil {
		return err
	}
	defer unlock()
	// Leftovers of a crashed run would collide with this one.
	if err := sweep(o.dir); err != nil {
		return err
	}
	repo, err := controlplane.RepoRoot()
	if err != nil {
		return fmt.Errorf("run the sandbox from a groundcloud checkout (make demo): %w", err)
	}
	if err := installDeps(ctx, repo); err != nil {
		return err
	}
	if o.bgp {
		if err := frr.Available(); err != nil {
			return err
		}
	}
	if o.bmc {
		if err := redfish.Available(); err != nil {
			return err
		}
	}
	progress("building the pinned Kubernetes binaries (cached after the first run; several minutes on 2 cores the first time)")
	tools, err := controlplane.ToolsDir(ctx)
	if err != nil {
		return err
	}
	subnet4, subnet6, err := chooseSubnets(o.subnet4, o.subnet6)
	if err != nil {
		return err
	}
	work := filepath.Join(o.dir, "run")
	_ = os.RemoveAll(work)
	var clients []string
	var bgpConfig func(*realcluster.Cluster) string
	if o.bgp {
		clients, bgpConfig = []string{"client", "frr"}, bgpCloudConfig
		o.lbHosts = max(o.lbHosts, 2)
	}
	var bmcCredentials map[string][]byte
	if o.bmc {
		if clients == nil {
			clients = []string{"client"}
		}
		clients = append(clients, "bmc")
		bmcCredentials = realcluster.BMCCredentials(workerNames(o.workers)...)
	}
	c, err := realcluster.Start(ctx, realcluster.Options{
		BMCCredentials: bmcCredentials,
		Topology:       netlab.Topology{Clients: clients, LBHosts: o.lbHosts, Prefix: labPrefix, Subnet4: subnet4, Subnet6: subnet6, Pool4: o.pool4, RootLink: rootLink},
		CloudConfigFor: bgpConfig,
		Dir:            work,
		ToolsDir:       tools,
		Repo:           repo,
		Workers:        o.workers,
		// Ctrl-C checks that the machine is as the sandbox found it.
		CheckHost: true,
		Logf:      func(format string, args ...any) { progress(format, args...) },
	})
	if err != nil {
		return err
	}
	defer func() {
		progress("removing the sandbox")
		cerr := c.Close()
		_ = os.RemoveAll(work)
		if cerr != nil {
			err = errors.Join(err, cerr)
			return
		}
		progress("sandbox removed; the machine's addresses, routes, ruleset, sysctls and mounts are as before")
	}()

	progress("creating the example: Deployment and LoadBalancer Service default/hello, with kubectl apply")
	ex, err := example(ctx, c, o.workers)
	if err != nil {
		return err
	}
	var bgp *bgpResult
	if o.bgp {
		r, res, err := startBGP(ctx, c, o.dir)
		if r != nil {
			defer func() { _ = stopRouter(r, o.dir) }()
		}
		if err != nil {
			return err
		}
		bgp = &res
	}
	var bmcPart string
	if o.bmc {
		dir := filepath.Join(work, "bmc")
		b, res, err := startBMC(ctx, c, dir, o.workers)
		if b != nil {
			defer func() { _ = b.Close() }()
		}
		if err != nil {
			return err
		}
		bmcPart = bmcSummary(res, dir)
	}
	printSummary(c, ex, bgp, bmcPart, tools, o.dir)
	<-ctx.Done()
	fmt.Println()
	return nil
}

func printSummary(c *realcluster.Cluster, ex exampleResult, bgp *bgpResult, bmcPart, tools, dir string) {
	pods, _ := c.CP.Kubectl(context.Background(), "get", "pods", "-A", "-o", "wide")
	var bgpPart string
	if bgp != nil {
		bgpPart = bgpSummary(*bgp)
	}
	bgpPart += bmcPart
	fmt.Printf(`
groundcloud sandbox is up: a Kubernetes cluster of %[1]d nodes in network namespaces
of this machine, groundcloud installed from deploy/.

$ kubectl get pods -A -o wide
%[2]s
  Service default/hello (%[3]s) has the address %[4]s. From this shell:

    curl http://%[4]s/

  answers: %[5]s%[9]s
  Kubernetes:

    export KUBECONFIG=%[6]s
    alias kubectl=%[7]s
    kubectl get nodes -o wide
    kubectl get svc,loadbalancers -A
    kubectl -n kube-system logs deploy/groundcloud-controller-manager

  Logs: %[8]s/run/ (control-plane/, nodes/<node>/)

Press Ctrl-C to remove everything.
`, len(c.Nodes), pods, ex.manifest, ex.vip, ex.answer, c.CP.AdminKubeconfig, filepath.Join(tools, "kubectl"), dir, bgpPart)
}

// lockPath is the machine-wide lock: one sandbox at a time, because its
// namespaces, root link and subnet have fixed names.
var lockPath = "/run/groundcloud-sandbox.lock"

// lock takes the sandbox's lock or says which process holds it. The lock
// file holds the holder's pid and state directory.
func lock(dir string) (func(), error) {
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		pid, holder := lockHolder()
		return nil, fmt.Errorf("a sandbox is already running (pid %d, state in %s); use it, stop it with Ctrl-C in its terminal, or run `groundcloud-sandbox down`", pid, holder)
	}
	_ = f.Truncate(0)
	_, _ = fmt.Fprintf(f, "%d %s\n", os.Getpid(), dir)
	return func() {
		_ = f.Truncate(0)
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, nil
}

// lockHolder reads the pid and state directory of the lock's holder.
func lockHolder() (int, string) {
	b, _ := os.ReadFile(lockPath)
	pid, dir, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	n, _ := strconv.Atoi(pid)
	return n, dir
}

// chooseSubnets picks the sandbox subnets: the given ones, or the first
// candidate that overlaps no route of this machine. A given one that
// overlaps is refused: the link into the sandbox would take over traffic.
func chooseSubnets(s4, s6 string) (netip.Prefix, netip.Prefix, error) {
	routes, err := hostPrefixes()
	if err != nil {
		return netip.Prefix{}, netip.Prefix{}, err
	}
	pick := func(given string, candidates ...string) (netip.Prefix, error) {
		if given != "" {
			candidates = []string{given}
		}
		for _, c := range candidates {
			p, err := netip.ParsePrefix(c)
			if err != nil {
				return netip.Prefix{}, fmt.Errorf("subnet %q: %w", c, err)
			}
			if r, ok := overlapping(p.Masked(), routes); ok {
				if given != "" {
					return netip.Prefix{}, fmt.Errorf("subnet %s overlaps this machine's route to %s; choose another", p, r)
				}
				continue
			}
			return p.Masked(), nil
		}
		return netip.Prefix{}, fmt.Errorf("every candidate subnet overlaps a route of this machine; pass one with --subnet")
	}
	p4, err := pick(s4, "198.51.100.0/24", "203.0.113.0/24", "100.127.200.0/24")
	if err != nil {
		return p4, p4, err
	}
	p6, err := pick(s6, "2001:db8:5a::/64")
	return p4, p6, err
}

func overlapping(p netip.Prefix, routes []netip.Prefix) (netip.Prefix, bool) {
	for _, r := range routes {
		if r.Bits() > 0 && r.Overlaps(p) {
			return r, true
		}
	}
	return netip.Prefix{}, false
}

// hostPrefixes are the destinations of this machine's routes (read only).
func hostPrefixes() ([]netip.Prefix, error) {
	routes, err := netlink.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, fmt.Errorf("read routes: %w", err)
	}
	var out []netip.Prefix
	for _, r := range routes {
		if r.Dst == nil {
			continue
		}
		if p, err := netip.ParsePrefix(r.Dst.String()); err == nil && !p.Addr().IsLinkLocalUnicast() && !p.Addr().IsMulticast() && !p.Addr().IsLoopback() {
			out = append(out, p)
		}
	}
	return out, nil
}

// installDeps runs hack/install-deps.sh (as make deps does): nftables,
// iproute2, containerd, runc and the CNI plugins when missing.
func installDeps(ctx context.Context, repo string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(repo, "hack", "install-deps.sh"))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("hack/install-deps.sh: %w", err)
	}
	return nil
}

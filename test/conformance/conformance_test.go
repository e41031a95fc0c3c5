package conformance

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/groundcloud/groundcloud/test/framework/controlplane"
	"github.com/groundcloud/groundcloud/test/framework/imagebuild"
	"github.com/groundcloud/groundcloud/test/framework/netlab"
	"github.com/groundcloud/groundcloud/test/framework/realcluster"
)

// The runner's network, behind the gateway: outside the nodes' /16 and
// /64, which the client-address spec takes for "inside the cluster".
var (
	runnerNet4 = netip.MustParsePrefix("203.0.113.0/24")
	runnerNet6 = netip.MustParsePrefix("2001:db8:ffff::/64")
)

// A BGP lane's pool lies outside the nodes' subnets, as docs/bgp.md asks
// ("Nodes must route the pool's addresses to the router"), and the nodes
// route it through the router: in proxy forwarding the load-balancer host
// SNATs a flow to its address, and a node on the address's own subnet
// would look for it with ARP, which no host answers for a BGP address (the
// first run of ipv4-bgp-proxy, with the pool in the nodes' /24, reached no
// Service).
var (
	bgpPool4 = netip.MustParsePrefix("198.51.100.0/27")
	bgpPool6 = netip.MustParsePrefix("2001:db8:100::/123")
)

// focus selects the LoadBalancer specs of both describes.
const focus = `\[sig-network\] LoadBalancers`

// procs is how many processes run the specs at once: 3, or
// GROUNDCLOUD_E2E_PROCS (make sig-network PROCS=...): most specs wait for
// Pods, so more processes finish a long run sooner on an idle machine.
func procs() int {
	if n, err := strconv.Atoi(os.Getenv("GROUNDCLOUD_E2E_PROCS")); err == nil && n > 0 {
		return n
	}
	return 3
}

// TestLoadBalancers runs Kubernetes' [sig-network] LoadBalancers specs on
// each lane GROUNDCLOUD_LANES names (see ParseLanes), each on a real
// cluster of its own: every spec must pass, or be skipped with its
// reason in skips.txt.
func TestLoadBalancers(t *testing.T) {
	if testing.Short() {
		t.Skip("conformance: runs a real cluster")
	}
	if os.Geteuid() != 0 {
		t.Skip("conformance: needs root")
	}
	lanes, err := ParseLanes(os.Getenv("GROUNDCLOUD_LANES"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := readSkips()
	if err != nil {
		t.Fatal(err)
	}
	skips, err := ParseSkips(data)
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("GROUNDCLOUD_CONFORMANCE") == "quick" {
		skips = append(skips, Long...)
	}
	for _, l := range lanes {
		t.Run(l.Name, func(t *testing.T) {
			lskips := For(skips, l.Name)
			runLane(t, l, focus, SkipRegexp(lskips), func(t *testing.T, results []Result, runErr error) {
				checkResults(t, l, Focused(results, regexp.MustCompile(focus)), lskips)
				if runErr != nil && !t.Failed() {
					t.Errorf("suite exited with %v though every spec passed or was skipped", runErr)
				}
			})
		})
	}
}

// networkFocus and networkSkip select the rest of [sig-network] that
// needs no cloud and nothing the test bed lacks (issue 32, item 4): not
// the LoadBalancer specs (TestLoadBalancers runs them), not a [Feature:]
// or a feature gate the cluster does not enable, and not [Serial],
// [Disruptive], [Slow] or [Flaky] specs, which upstream's default jobs
// leave out as well.
const (
	networkFocus = `\[sig-network\]`
	networkSkip  = `\[sig-network\] LoadBalancers|\[Feature:|\[FeatureGate:|\[Alpha\]|\[Beta\]|\[Serial\]|\[Disruptive\]|\[Slow\]|\[Flaky\]`
)

// TestSigNetwork runs the rest of Kubernetes' [sig-network] specs once on
// the default lane (`make sig-network`; skipped otherwise) and reports
// each spec's outcome, with the failures' messages: what fails there may
// be ours (the agent's ruleset, the router's routes on the nodes) or the
// test bed's, which the report says. It fails only when the suite did not
// run.
func TestSigNetwork(t *testing.T) {
	if os.Getenv("GROUNDCLOUD_CONFORMANCE") != "sig-network" {
		t.Skip("make sig-network runs it (GROUNDCLOUD_CONFORMANCE=sig-network)")
	}
	if os.Geteuid() != 0 {
		t.Skip("conformance: needs root")
	}
	lane, err := ParseLane(DefaultLane)
	if err != nil {
		t.Fatal(err)
	}
	// GROUNDCLOUD_SIG_NETWORK_FOCUS (make sig-network FOCUS=...) narrows
	// the run to the specs it matches among those, e.g. to run again what
	// failed.
	focus := networkFocus
	if f := os.Getenv("GROUNDCLOUD_SIG_NETWORK_FOCUS"); f != "" {
		if _, err := regexp.Compile(f); err != nil {
			t.Fatalf("GROUNDCLOUD_SIG_NETWORK_FOCUS: %v", err)
		}
		focus = f
	}
	runLane(t, lane, focus, networkSkip, func(t *testing.T, results []Result, _ error) {
		results = Focused(results, regexp.MustCompile(networkFocus))
		counts := map[string]int{}
		for _, r := range results {
			counts[r.State]++
			t.Logf("%-7s %6.0fs  %s", r.State, r.Seconds, r.Name)
		}
		for _, r := range results {
			if r.State == "failed" {
				t.Logf("FAILED %s:\n%s", r.Name, r.Message)
			}
		}
		t.Logf("[sig-network] on lane %s: %d passed, %d failed, %d skipped", lane.Name, counts["passed"], counts["failed"], counts["skipped"])
		if counts["passed"]+counts["failed"] == 0 {
			t.Error("no spec ran")
		}
	})
}

// runLane starts a cluster for lane, runs the specs focus selects but
// skip (a regular expression; "" none) on it, and gives check their
// results and how the suite exited.
func runLane(t *testing.T, lane Lane, focus, skip string, check func(*testing.T, []Result, error)) {
	tools, err := controlplane.ToolsDir(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	e2e := filepath.Join(tools, "e2e")
	refs, err := suiteImages(t.Context(), e2e)
	if err != nil {
		t.Fatal(err)
	}
	pods, services := lane.clusterCIDRs()
	opts := realcluster.Options{
		// A dedicated load-balancer host and two workers, as the sandbox
		// runs: the rolling-update specs need two schedulable nodes.
		Topology:    netlab.Topology{LBHosts: 1, Clients: []string{"gw"}},
		ToolsDir:    tools,
		DefaultPool: lane.poolKeys(),
		ClusterCIDR: pods,
		ServiceCIDR: services,
	}
	if lane.Announce == "bgp" {
		opts.CloudConfigFor = func(c *realcluster.Cluster) string { return realcluster.BGPPeers(c.Clients["gw"]) }
		opts.Topology.Pool4, opts.Topology.Pool6 = bgpPool4.String(), bgpPool6.String()
	}
	c := realcluster.StartT(t, opts)
	ctx := t.Context()
	gw := c.Clients["gw"]
	if lane.Announce == "bgp" {
		if _, err := c.StartFRR(ctx, gw); err != nil {
			t.Fatal(err)
		}
	}
	runner, kubeconfig := startRunner(t, c, gw)
	if lane.Announce == "bgp" {
		for _, n := range c.Nodes {
			if err := realcluster.RouteThrough(ctx, n.Host, gw, bgpPool4, bgpPool6); err != nil {
				t.Fatal(err)
			}
		}
	}
	importSuiteImages(t, c, tools, refs)
	report := filepath.Join(c.Opts.Dir, "e2e")
	suiteArgs := []string{
		"-kubeconfig=" + kubeconfig,
		"-provider=skeleton",
		"-kubectl-path=" + filepath.Join(tools, "kubectl"),
		// The load-balancer host is dedicated: tainted, as docs/install.md
		// sets it up; Pods of the specs run on the workers.
		"-non-blocking-taints=groundcloud.io/load-balancer,node-role.kubernetes.io/control-plane",
		"-report-dir=" + report,
		// Every node is schedulable for the suite (the taints above do
		// not block). Said explicitly: the suite counts the nodes in its
		// first process only, and specs in the others would skip with
		// "Requires at least 2 nodes (not -1)".
		"-num-nodes=" + strconv.Itoa(len(c.Nodes)),
	}
	ginkgoArgs := []string{
		// In parallel, as upstream's CI runs the suite: the two
		// rolling-update specs take about ten minutes each (five updates of
		// a DaemonSet whose Pods take 60 s to stop).
		"--procs=" + strconv.Itoa(procs()),
		"--focus=" + focus,
		"--no-color", "-v",
		"--timeout=2h",
	}
	if skip != "" {
		ginkgoArgs = append(ginkgoArgs, "--skip="+skip)
	}
	logPath := filepath.Join(c.Opts.Dir, "e2e.log")
	start := time.Now()
	runErr := runSuite(ctx, runner, filepath.Join(tools, "ginkgo"), e2e, ginkgoArgs, suiteArgs, logPath)
	t.Logf("lane %s: the suite ran %s (log %s)", lane.Name, time.Since(start).Round(time.Second), logPath)
	results, err := ReadJUnit(filepath.Join(report, "junit_01.xml"))
	if err != nil {
		t.Fatalf("suite: %v (exit: %v); tail of its log:\n%s", err, runErr, controlplane.LogTail(logPath, 60))
	}
	check(t, results, runErr)
	if t.Failed() {
		t.Logf("tail of the suite's log:\n%s", controlplane.LogTail(logPath, 200))
	}
}

// checkResults fails the test for every failed spec and every spec skipped
// without a reason in skips.txt, and logs each spec's outcome.
func checkResults(t *testing.T, lane Lane, results []Result, skips []Skip) {
	t.Helper()
	counts := map[string]int{}
	for _, r := range results {
		counts[r.State]++
		t.Logf("%-7s %6.0fs  %s", r.State, r.Seconds, r.Name)
		switch r.State {
		case "failed":
			t.Errorf("lane %s: %s failed:\n%s", lane.Name, r.Name, r.Message)
		case "skipped":
			if _, ok := Listed(skips, r.Name); !ok {
				t.Errorf("lane %s: %s skipped (%s) with no reason in skips.txt", lane.Name, r.Name, r.Message)
			}
		}
	}
	if counts["passed"]+counts["failed"] == 0 {
		t.Errorf("lane %s: no spec ran", lane.Name)
	}
	t.Logf("lane %s: %d passed, %d failed, %d skipped", lane.Name, counts["passed"], counts["failed"], counts["skipped"])
}

// startRunner adds the runner's host behind gw, routes the runner's
// network through gw from every node, relays the apiserver into the
// runner as into a node, and writes the runner's kubeconfig.
func startRunner(t *testing.T, c *realcluster.Cluster, gw *netlab.Host) (*netlab.Host, string) {
	t.Helper()
	ctx := t.Context()
	runner, err := c.Lab.AddHostBehind(ctx, "runner", gw, runnerNet4, runnerNet6)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		if err := realcluster.RouteThrough(ctx, n.Host, gw, runnerNet4, runnerNet6); err != nil {
			t.Fatal(err)
		}
	}
	if err := runner.AddAddress("lo", netip.PrefixFrom(c.APIServer.Addr(), c.APIServer.Addr().BitLen())); err != nil {
		t.Fatal(err)
	}
	relay, err := runner.Forward(context.Background(), c.APIServer.String(), strings.TrimPrefix(c.CP.URL, "https://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = relay.Close() })
	kubeconfig := filepath.Join(c.Opts.Dir, "runner.kubeconfig")
	if err := c.CP.WriteKubeconfig(kubeconfig, controlplane.AdminUser, "https://"+c.APIServer.String()); err != nil {
		t.Fatal(err)
	}
	return runner, kubeconfig
}

// runSuite runs the suite with the ginkgo command in the runner's
// namespace, its output to logPath. ginkgo runs a compiled test binary
// (a name ending in .test) in parallel processes: the suite, through a
// link of that name.
func runSuite(ctx context.Context, runner *netlab.Host, ginkgo, e2e string, ginkgoArgs, suiteArgs []string, logPath string) error {
	link := filepath.Join(filepath.Dir(logPath), "e2e.test")
	if err := os.Symlink(e2e, link); err != nil {
		return err
	}
	f, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer f.Close()
	args := append(append(ginkgoArgs, link, "--"), suiteArgs...)
	cmd := runner.Command(ctx, ginkgo, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.WaitDelay = 10 * time.Second
	return cmd.Run()
}

// suiteImages are the names under which the suite (-list-images) asks for
// the images the test bed builds, by image: agnhost, which every lane's
// specs run, and those the rest of [sig-network] needs.
func suiteImages(ctx context.Context, e2e string) (map[string][]string, error) {
	out, err := exec.CommandContext(ctx, e2e, "-list-images").Output()
	if err != nil {
		return nil, fmt.Errorf("%s -list-images: %w", e2e, err)
	}
	refs := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		ref := strings.TrimSpace(sc.Text())
		for _, name := range []string{"agnhost", "glibc-dns-testing", "distroless-iptables", "regression-issue-74839", "pause", "busybox"} {
			if strings.Contains(ref, "/"+name+":") {
				refs[name] = append(refs[name], ref)
			}
		}
	}
	if len(refs["agnhost"]) == 0 {
		return nil, fmt.Errorf("%s -list-images names no agnhost image:\n%s", e2e, out)
	}
	return refs, nil
}

// importSuiteImages builds the images of refs and imports each into every
// node under the names the suite asks for.
func importSuiteImages(t *testing.T, c *realcluster.Cluster, tools string, refs map[string][]string) {
	t.Helper()
	ctx := t.Context()
	dir := filepath.Join(c.Opts.Dir, "images")
	build := map[string]func() (imagebuild.Image, error){
		"agnhost":             func() (imagebuild.Image, error) { return realcluster.BuildAgnhost(ctx, tools, dir) },
		"glibc-dns-testing":   func() (imagebuild.Image, error) { return realcluster.BuildGlibcDNSTesting(ctx, tools, dir) },
		"distroless-iptables": func() (imagebuild.Image, error) { return realcluster.BuildDistrolessIptables(ctx, dir) },
		"regression-issue-74839": func() (imagebuild.Image, error) {
			return realcluster.BuildRegressionIssue74839(ctx, tools, dir)
		},
		"busybox": func() (imagebuild.Image, error) { return realcluster.BuildBusybox(ctx, dir) },
		// The Pods' sandbox, which Service endpoints latency also runs.
		"pause": func() (imagebuild.Image, error) { return c.Images.Pause, nil },
	}
	for name, names := range refs {
		img, err := build[name]()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.ImportAs(ctx, img, names...); err != nil {
			t.Fatal(err)
		}
	}
}

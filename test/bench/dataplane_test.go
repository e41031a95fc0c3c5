package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/groundcloud/groundcloud/internal/annotation"
	"github.com/groundcloud/groundcloud/test/framework/netlab"
	"github.com/groundcloud/groundcloud/test/framework/realcluster"
	"github.com/groundcloud/groundcloud/test/images/echo"
)

// The data-plane benchmark runs on the real cluster (test/framework/realcluster):
// groundcloud-echo Pods on two workers behind kube-proxy, one dedicated
// load-balancer host running the agent from deploy/, a client, and a plain
// router host. Its Services: TCP port 80 (HTTP) and UDP port 53, both
// externalTrafficPolicy Local, so every path ends at the receiving node's
// own Pod.
const (
	dpUDPPort     = 53
	dpHAProxyPort = 8080
	// dpExtraHost is the host number (in the lab's subnet) of the client's
	// second address, the router path's (+1) and the direct path's (+2)
	// external IPs; the lab hands out the lowest numbers, the pool is
	// .200-.219.
	dpExtraHost = 240
	// dpLargeSize is the response size of the bulk mode.
	dpLargeSize = 1 << 20
	// dpService is the Deployment and the passthrough Service;
	// dpProxyService the proxy-forwarding Service in front of the same Pods.
	dpService      = "dataplane"
	dpProxyService = "dataplane-proxy"
)

// Paths, in the order of the first round (later rounds rotate it).
const (
	pathProxy       = "proxy"
	pathPassthrough = "passthrough"
	pathRouter      = "router"
	pathDirect      = "direct"
	pathHAProxy     = "haproxy"
)

// Modes of the load.
const (
	modeKeepAlive = "keepalive"
	modeClose     = "close"
	modeUDP       = "udp"
	modeLarge     = "large"
)

// dpConfig is the load of one measurement, the same for every path.
type dpConfig struct {
	rounds     int
	duration   time.Duration
	threads    int // wrk threads
	conns      int // wrk connections, spread evenly over the threads
	largeConns int // wrk connections of the bulk mode
	udpSenders int
}

func dataPlaneConfig() dpConfig {
	c := dpConfig{rounds: 3, duration: 5 * time.Second, threads: 3, conns: 48, largeConns: 12, udpSenders: 16}
	if n, err := strconv.Atoi(os.Getenv("GROUNDCLOUD_BENCH_ROUNDS")); err == nil && n > 0 {
		c.rounds = n
	}
	if d, err := time.ParseDuration(os.Getenv("GROUNDCLOUD_BENCH_DURATION")); err == nil && d >= time.Second {
		c.duration = d
	}
	return c
}

// dpTarget is where one path's load goes: one address for HTTP (wrk's
// URL) and one for UDP (none for HAProxy).
type dpTarget struct {
	path string
	url  string
	tcp  netip.AddrPort
	udp  netip.AddrPort
	// sees is the client address the Pods see on this path.
	sees netip.Addr
	// via is the host between client and nodes whose link is counted (the
	// load-balancer host, the router); nil for the direct path.
	via *netlab.Host
}

// dpRun is one measurement of one path in one mode.
type dpRun struct {
	path, mode string
	round      int
	rps        float64
	p50, p75   time.Duration
	p90, p99   time.Duration
	requests   int
	errors     int // wrk socket errors + non-2xx, or lost UDP requests
	// viaBytes and viaPackets are what the link of the path's middle host
	// received and sent meanwhile; cpu is the busy time of the whole
	// machine (every core) meanwhile.
	viaBytes, viaPackets uint64
	cpu                  time.Duration
}

// TestDataPlaneBenchmark measures requests/s, latency, bytes through the
// load-balancer host and CPU from the client through groundcloud's two
// forwarding modes (proxy: DNAT+SNAT on the load-balancer host;
// passthrough: the packet forwarded unchanged, direct return), through a
// plain IP router, directly to the nodes, and through HAProxy on the
// load-balancer host, every path ending at kube-proxy and a Pod; HTTP with
// wrk (keep-alive, a connection per request, 1 MiB responses) and UDP
// request/response. See docs/benchmarks.md, section "Data plane".
func TestDataPlaneBenchmark(t *testing.T) {
	skipUnlessBench(t)
	start := time.Now()
	requireDataPlaneTools(t)
	cfg := dataPlaneConfig()
	c := realcluster.StartT(t, realcluster.Options{
		Topology: netlab.Topology{LBHosts: 1, Clients: []string{"client", "router"}},
		Workers:  2,
	})
	bed := newDPBed(c)
	vips := deployDataPlane(t, bed)
	bed.setUpRoutes(t)
	startHAProxy(t, bed)

	targets := bed.targets(vips)
	for _, tg := range targets {
		checkPath(t, bed, tg)
	}
	tcpPaths := []string{pathProxy, pathPassthrough, pathRouter, pathDirect, pathHAProxy}
	udpPaths := []string{pathProxy, pathPassthrough, pathRouter, pathDirect}
	for _, p := range tcpPaths { // warm-up, not recorded
		_, err := runWrk(t, bed.client, targets[p], cfg, modeKeepAlive, time.Second)
		must(t, err)
	}
	var runs []dpRun
	record := func(run dpRun, r int) {
		run.round = r + 1
		t.Logf("round %d %-9s %-11s %9.0f req/s  p50 %-8s p99 %-8s errors %d  via %d B  cpu %s",
			run.round, run.mode, run.path, run.rps, run.p50, run.p99, run.errors, run.viaBytes, run.cpu.Round(time.Millisecond))
		runs = append(runs, run)
	}
	for r := range cfg.rounds {
		for _, mode := range []string{modeKeepAlive, modeClose, modeLarge} {
			for _, p := range rotate(tcpPaths, r) {
				run, err := measure(targets[p], func() (dpRun, error) { return runWrk(t, bed.client, targets[p], cfg, mode, cfg.duration) })
				must(t, err)
				record(run, r)
			}
		}
		for _, p := range rotate(udpPaths, r) {
			run, err := measure(targets[p], func() (dpRun, error) {
				return runUDP(t.Context(), bed.client, targets[p], cfg.udpSenders, cfg.duration)
			})
			must(t, err)
			record(run, r)
		}
	}
	res := dpResults{cfg: cfg, runs: runs, haproxyConfig: haproxyConfig(bed), elapsed: time.Since(start)}
	for _, l := range res.lines() {
		fmt.Println(l)
	}
	if path := os.Getenv("GROUNDCLOUD_BENCH_DOCS"); path != "" && !t.Failed() {
		must(t, writeSection(path, "## Data plane", dataPlaneSection(t, res)))
		t.Logf("wrote the Data plane section of %s", path)
	}
}

// measure runs one load and adds what the path's middle host's link
// carried and the machine's busy time meanwhile.
func measure(tg dpTarget, load func() (dpRun, error)) (dpRun, error) {
	var before, after linkCounters
	var err error
	if tg.via != nil {
		if before, err = countersOf(tg.via); err != nil {
			return dpRun{}, err
		}
	}
	cpu0, err := machineBusy()
	if err != nil {
		return dpRun{}, err
	}
	run, err := load()
	if err != nil {
		return dpRun{}, err
	}
	cpu1, err := machineBusy()
	if err != nil {
		return dpRun{}, err
	}
	run.cpu = cpu1 - cpu0
	if tg.via != nil {
		if after, err = countersOf(tg.via); err != nil {
			return dpRun{}, err
		}
		run.viaBytes, run.viaPackets = after.bytes-before.bytes, after.packets-before.packets
	}
	return run, nil
}

// linkCounters are a host link's received plus sent bytes and packets.
type linkCounters struct{ bytes, packets uint64 }

func countersOf(h *netlab.Host) (linkCounters, error) {
	st, err := linkStats(h)
	if err != nil {
		return linkCounters{}, err
	}
	return linkCounters{bytes: st.RxBytes + st.TxBytes, packets: st.RxPackets + st.TxPackets}, nil
}

func linkStats(h *netlab.Host) (*netlink.LinkStatistics, error) {
	var st *netlink.LinkStatistics
	err := h.Do(func() error {
		link, err := netlink.LinkByName(h.Iface)
		if err != nil {
			return err
		}
		st = link.Attrs().Statistics
		if st == nil {
			return errors.New("no link statistics")
		}
		return nil
	})
	return st, err
}

// machineBusy is the machine's busy CPU time so far, all cores: user,
// nice, system, irq, softirq and steal of /proc/stat's "cpu" line.
func machineBusy() (time.Duration, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	return parseBusy(string(data))
}

// userHz is the unit of /proc/stat (USER_HZ, 100 on Linux).
const userHz = 100

func parseBusy(stat string) (time.Duration, error) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var ticks uint64
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system (idle iowait) irq softirq steal
		v, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %q: %w", line, err)
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / userHz, nil
}

// rotate returns s started at its (r mod len)-th element, so that no path
// (or number of hosts) is always measured first or last in a round.
func rotate[T any](s []T, r int) []T {
	r %= len(s)
	return slices.Concat(s[r:], s[:r])
}

// requireDataPlaneTools fails (not skips) when a load tool is missing.
func requireDataPlaneTools(t *testing.T) {
	t.Helper()
	var missing []string
	for _, tool := range []string{"wrk", "haproxy", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("the data-plane benchmark needs %s: install it with `apt-get install -y wrk haproxy iproute2` (Debian; hack/bench.sh does it)", strings.Join(missing, ", "))
	}
}

// dpBed is the cluster as the benchmark uses it.
type dpBed struct {
	c              *realcluster.Cluster
	client, router *netlab.Host
	lb             *netlab.Host
	workers        []*netlab.Host
	// clientSecond is the client's second address, the router path's
	// source; routerIP and directIP are the Services' external IPs that
	// the router and the direct path reach.
	clientSecond, routerIP, directIP netip.Addr
	nodePort                         int32 // the passthrough Service's HTTP NodePort, HAProxy's backend
}

func newDPBed(c *realcluster.Cluster) *dpBed {
	b := &dpBed{c: c, client: c.Clients["client"], router: c.Clients["router"]}
	for _, n := range c.Nodes {
		if n.LoadBalancer {
			b.lb = n.Host
		} else {
			b.workers = append(b.workers, n.Host)
		}
	}
	nth := func(n int) netip.Addr {
		a := c.Lab.Subnet4.Masked().Addr()
		for range n {
			a = a.Next()
		}
		return a
	}
	b.clientSecond, b.routerIP, b.directIP = nth(dpExtraHost), nth(dpExtraHost+1), nth(dpExtraHost+2)
	return b
}

// deployDataPlane runs groundcloud-echo on both workers (one Pod each) and
// creates the two LoadBalancer Services in front of them: passthrough
// forwarding (the pool's default), with the router and direct paths'
// external IPs, and proxy forwarding. It returns their addresses.
func deployDataPlane(t *testing.T, b *dpBed) map[string]netip.Addr {
	t.Helper()
	ctx := t.Context()
	d := b.c.EchoDeployment("default", dpService, int32(len(b.workers)))
	d.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule,
		NodeTaintsPolicy: ptr.To(corev1.NodeInclusionPolicyHonor),
		LabelSelector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": dpService}},
	}}
	_, err := b.c.Client.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{})
	must(t, err)
	service := func(name string, annotations map[string]string, externalIPs []string) *corev1.Service {
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: annotations},
			Spec: corev1.ServiceSpec{
				Type:                  corev1.ServiceTypeLoadBalancer,
				ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
				Selector:              map[string]string{"app": dpService},
				ExternalIPs:           externalIPs,
				Ports: []corev1.ServicePort{
					{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(realcluster.EchoHTTPPort)},
					{Name: "udp", Protocol: corev1.ProtocolUDP, Port: dpUDPPort, TargetPort: intstr.FromInt32(realcluster.EchoUDPPort)},
				},
			},
		}
	}
	for _, s := range []*corev1.Service{
		service(dpService, nil, []string{b.routerIP.String(), b.directIP.String()}),
		service(dpProxyService, map[string]string{annotation.Forwarding: "proxy"}, nil),
	} {
		created, err := b.c.Client.CoreV1().Services("default").Create(ctx, s, metav1.CreateOptions{})
		must(t, err)
		if s.Name == dpService {
			b.nodePort = created.Spec.Ports[0].NodePort
		}
	}
	must(t, b.c.WaitDeploymentReady(ctx, "default", dpService))
	vips := map[string]netip.Addr{}
	for path, name := range map[string]string{pathPassthrough: dpService, pathProxy: dpProxyService} {
		vip, err := b.c.WaitLoadBalancerIP(ctx, "default", name)
		must(t, err)
		vips[path] = vip
	}
	return vips
}

// setUpRoutes prepares the router and the direct path so that, like the
// VIPs and HAProxy, each has one address and spreads connections over the
// workers per flow; kube-proxy on the receiving worker serves the address
// as one of the Service's external IPs (Local: its own Pod, no NAT of the
// source). The router host forwards the router path's address to the
// workers by an equal-cost multipath route hashing on layer 4
// (fib_multipath_hash_policy=1); the client reaches it from a second
// address of its own through a /32 route via the router, and the workers
// send the replies back through the router by a /32 route too (all hosts
// share one bridge: without these routes the replies would bypass it).
// The client reaches the direct path's address by such a multipath route
// over the workers itself. ICMP redirects are off on the router and not
// accepted by the client and the workers. Everything is set inside the
// cluster's namespaces only.
func (b *dpBed) setUpRoutes(t *testing.T) {
	t.Helper()
	ipIn := func(h *netlab.Host, args ...string) {
		t.Helper()
		if out, err := h.Command(t.Context(), "ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s in %s: %v\n%s", strings.Join(args, " "), h.Name, err, out)
		}
	}
	conf := func(h *netlab.Host, key, value string) {
		t.Helper()
		for _, dev := range []string{"all", "default", h.Iface} {
			must(t, h.SetSysctl("net.ipv4.conf."+dev+"."+key, value))
		}
	}
	ecmp := func(h *netlab.Host, dst, src netip.Addr) {
		t.Helper()
		must(t, h.SetSysctl("net.ipv4.fib_multipath_hash_policy", "1"))
		args := []string{"route", "add", dst.String() + "/32"}
		if src.IsValid() {
			args = append(args, "src", src.String())
		}
		for _, w := range b.workers {
			args = append(args, "nexthop", "via", w.Addr4.String(), "dev", h.Iface)
		}
		ipIn(h, args...)
	}
	must(t, b.router.SetSysctl("net.ipv4.ip_forward", "1"))
	conf(b.router, "send_redirects", "0")
	ecmp(b.router, b.routerIP, netip.Addr{})
	ipIn(b.client, "addr", "add", netip.PrefixFrom(b.clientSecond, b.c.Lab.Subnet4.Bits()).String(), "dev", b.client.Iface)
	conf(b.client, "accept_redirects", "0")
	ipIn(b.client, "route", "add", b.routerIP.String()+"/32", "via", b.router.Addr4.String(), "dev", b.client.Iface, "src", b.clientSecond.String())
	ecmp(b.client, b.directIP, b.client.Addr4)
	for _, w := range b.workers {
		conf(w, "accept_redirects", "0")
		ipIn(w, "route", "add", b.clientSecond.String()+"/32", "via", b.router.Addr4.String(), "dev", w.Iface)
	}
}

// targets are the paths' addresses and what the Pods see on each.
func (b *dpBed) targets(vips map[string]netip.Addr) map[string]dpTarget {
	target := func(path string, addr netip.Addr, httpPort uint16, sees netip.Addr, via *netlab.Host) dpTarget {
		tg := dpTarget{path: path, tcp: netip.AddrPortFrom(addr, httpPort), sees: sees, via: via}
		tg.url = fmt.Sprintf("http://%s/", tg.tcp)
		if path != pathHAProxy {
			tg.udp = netip.AddrPortFrom(addr, dpUDPPort)
		}
		return tg
	}
	return map[string]dpTarget{
		// Proxy forwarding rewrites the source to the VIP.
		pathProxy:       target(pathProxy, vips[pathProxy], 80, vips[pathProxy], b.lb),
		pathPassthrough: target(pathPassthrough, vips[pathPassthrough], 80, b.client.Addr4, b.lb),
		pathRouter:      target(pathRouter, b.routerIP, 80, b.clientSecond, b.router),
		pathDirect:      target(pathDirect, b.directIP, 80, b.client.Addr4, nil),
		pathHAProxy:     target(pathHAProxy, b.lb.Addr4, dpHAProxyPort, b.lb.Addr4, b.lb),
	}
}

// haproxyConfig is HAProxy's configuration for the benchmark: an
// equivalent TCP load balancer on the load-balancer host's own address,
// over the workers' NodePorts.
func haproxyConfig(b *dpBed) string {
	var s strings.Builder
	fmt.Fprintf(&s, `global
    nbthread 2
    maxconn 8000

defaults
    mode tcp
    timeout connect 5s
    timeout client 30s
    timeout server 30s

frontend bench
    bind %s
    default_backend nodes

backend nodes
    balance roundrobin
`, netip.AddrPortFrom(b.lb.Addr4, dpHAProxyPort))
	for _, w := range b.workers {
		fmt.Fprintf(&s, "    server %s %s check\n", w.Name, netip.AddrPortFrom(w.Addr4, uint16(b.nodePort)))
	}
	return s.String()
}

// startHAProxy runs HAProxy in the load-balancer host's namespace until the
// test ends, and waits until it accepts connections.
func startHAProxy(t *testing.T, b *dpBed) {
	t.Helper()
	dir := t.TempDir()
	conf := filepath.Join(dir, "haproxy.cfg")
	must(t, os.WriteFile(conf, []byte(haproxyConfig(b)), 0o644))
	if out, err := exec.Command("haproxy", "-c", "-f", conf).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c: %v\n%s", err, out)
	}
	// -db: stay in the foreground, so the lab owns the process (and its
	// process group) and Stop ends it.
	p, err := b.lb.Start(context.Background(), filepath.Join(dir, "haproxy.log"), "haproxy", "-db", "-f", conf)
	if err != nil {
		t.Fatalf("start haproxy in %s: %v", b.lb.Name, err)
	}
	t.Cleanup(func() { _ = p.Stop() })
	addr := netip.AddrPortFrom(b.lb.Addr4, dpHAProxyPort)
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		conn, err := b.client.DialTCP(ctx, addr)
		cancel()
		if err == nil {
			conn.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("haproxy does not accept on %s: %v; its log:\n%s", addr, err, p.Output())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkPath makes sure a path works before it is measured: HTTP answers
// from the Pods of both workers (within some attempts), each seeing the
// expected client address, a 1 MiB answer in full, and a UDP answer.
func checkPath(t *testing.T, b *dpBed, tg dpTarget) {
	t.Helper()
	hc := b.client.HTTPClient()
	seen := map[string]bool{}
	deadline := time.Now().Add(time.Minute)
	var last string
	for len(seen) < len(b.workers) {
		if time.Now().After(deadline) {
			t.Fatalf("path %s: answers from %d of %d workers within a minute; last: %s", tg.path, len(seen), len(b.workers), last)
		}
		// A new connection each time: another source port, maybe another node.
		resp, err := hc.Get(tg.url)
		if err != nil {
			last = err.Error()
			time.Sleep(50 * time.Millisecond)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		said, err := echo.Parse(string(body))
		if err != nil {
			t.Fatalf("path %s: %v", tg.path, err)
		}
		if said.Client.Addr() != tg.sees {
			t.Fatalf("path %s: the Pod on %s saw the client as %s, want %s", tg.path, said.Node, said.Client, tg.sees)
		}
		seen[said.Node] = true
	}
	resp, err := hc.Get(tg.url + "?bytes=" + strconv.Itoa(dpLargeSize))
	if err != nil {
		t.Fatalf("path %s: large answer: %v", tg.path, err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || n != dpLargeSize {
		t.Fatalf("path %s: large answer: %d bytes (%v), want %d", tg.path, n, err, dpLargeSize)
	}
	if tg.udp.IsValid() {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		reply, err := b.client.UDPExchange(ctx, tg.udp, []byte("check"))
		cancel()
		if err != nil {
			t.Fatalf("path %s: udp: %v", tg.path, err)
		}
		said, err := echo.Parse(string(reply))
		if err != nil {
			t.Fatalf("path %s: udp: %v", tg.path, err)
		}
		if said.Client.Addr() != tg.sees {
			t.Fatalf("path %s: udp: the Pod saw %s, want %s", tg.path, said.Client, tg.sees)
		}
	}
}

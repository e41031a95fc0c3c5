package bench

import (
	"context"
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

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundcloud/groundcloud/internal/lab"
	"github.com/groundcloud/groundcloud/internal/sandbox"
	"github.com/groundcloud/groundcloud/internal/testbed"
)

// The data-plane benchmark's service: HTTP over TCP on port 80 and a UDP
// port, both on the nodes' NodePorts, where nodesim answers.
const (
	dpHTTPNodePort = 30080
	dpUDPNodePort  = 30053
	dpUDPPort      = 53
	dpHAProxyPort  = 8080
	// dpExtraHost is the host number (in the lab's subnet) of the first of
	// the addresses setUpRoutes adds; the lab hands out the lowest
	// numbers, the pool is .200-.219.
	dpExtraHost = 240
)

// Paths, in the order of the first round (later rounds rotate it).
const (
	pathVIP     = "vip"
	pathRouter  = "router"
	pathDirect  = "direct"
	pathHAProxy = "haproxy"
)

// Modes of the HTTP load.
const (
	modeKeepAlive = "keepalive"
	modeClose     = "close"
	modeUDP       = "udp"
)

// dpConfig is the load of one measurement, the same for every path.
type dpConfig struct {
	rounds     int
	duration   time.Duration
	threads    int // wrk threads
	conns      int // wrk connections, spread evenly over the threads
	udpSenders int
}

func dataPlaneConfig() dpConfig {
	c := dpConfig{rounds: 3, duration: 5 * time.Second, threads: 3, conns: 48, udpSenders: 16}
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
	// sees is the client address the nodes see on this path.
	sees netip.Addr
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
}

// TestDataPlaneBenchmark measures requests/s and latency from the client
// host through the VIP (groundcloud's nftables DNAT+SNAT on the LB host),
// through the same LB host as a plain router, directly to the nodes, and
// through HAProxy on the LB host; HTTP with wrk in keep-alive and
// connection-per-request mode, and UDP request/response with a small Go
// generator. See docs/benchmarks.md, section "Data plane".
func TestDataPlaneBenchmark(t *testing.T) {
	skipUnlessBench(t)
	start := time.Now()
	requireDataPlaneTools(t)
	cfg := dataPlaneConfig()
	e := startDataPlaneEnv(t)
	client, lb := e.Clients["client"], e.LBs[0]

	vip := createDataPlaneService(t, e)
	rt := setUpRoutes(t, e)
	startHAProxy(t, e)

	target := func(path string, tcp, udp netip.AddrPort, sees netip.Addr) dpTarget {
		return dpTarget{path: path, url: fmt.Sprintf("http://%s/", tcp), tcp: tcp, udp: udp, sees: sees}
	}
	targets := map[string]dpTarget{
		pathVIP: target(pathVIP, netip.AddrPortFrom(vip, 80), netip.AddrPortFrom(vip, dpUDPPort), vip),
		pathRouter: target(pathRouter, netip.AddrPortFrom(rt.router, dpHTTPNodePort),
			netip.AddrPortFrom(rt.router, dpUDPNodePort), rt.client),
		pathDirect: target(pathDirect, netip.AddrPortFrom(rt.direct, dpHTTPNodePort),
			netip.AddrPortFrom(rt.direct, dpUDPNodePort), client.Addr4),
		pathHAProxy: target(pathHAProxy, netip.AddrPortFrom(lb.Addr4, dpHAProxyPort), netip.AddrPort{}, lb.Addr4),
	}
	for _, tg := range targets {
		checkPath(t, e, tg)
	}

	tcpPaths := []string{pathVIP, pathRouter, pathDirect, pathHAProxy}
	udpPaths := []string{pathVIP, pathRouter, pathDirect}
	for _, p := range tcpPaths { // warm-up, not recorded
		_, err := runWrk(t, client, targets[p], cfg, modeKeepAlive, time.Second)
		must(t, err)
	}
	var runs []dpRun
	for r := range cfg.rounds {
		for _, mode := range []string{modeKeepAlive, modeClose} {
			for _, p := range rotate(tcpPaths, r) {
				run, err := runWrk(t, client, targets[p], cfg, mode, cfg.duration)
				must(t, err)
				run.round = r + 1
				t.Logf("round %d %-9s %-7s %9.0f req/s  p50 %-8s p99 %-8s errors %d", run.round, mode, p, run.rps, run.p50, run.p99, run.errors)
				runs = append(runs, run)
			}
		}
		for _, p := range rotate(udpPaths, r) {
			run, err := runUDP(t.Context(), client, targets[p], cfg.udpSenders, cfg.duration)
			must(t, err)
			run.round = r + 1
			t.Logf("round %d %-9s %-7s %9.0f req/s  p50 %-8s p99 %-8s lost %d", run.round, modeUDP, p, run.rps, run.p50, run.p99, run.errors)
			runs = append(runs, run)
		}
	}
	res := dpResults{cfg: cfg, runs: runs, haproxyConfig: haproxyConfig(e), elapsed: time.Since(start)}
	for _, l := range res.lines() {
		fmt.Println(l)
	}
	if path := os.Getenv("GROUNDCLOUD_BENCH_DOCS"); path != "" && !t.Failed() {
		must(t, writeSection(path, "## Data plane", dataPlaneSection(t, res)))
		t.Logf("wrote the Data plane section of %s", path)
	}
}

// rotate returns s started at its (r mod len)-th element, so that no path
// is always measured first or last in a round.
func rotate(s []string, r int) []string {
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

func startDataPlaneEnv(t *testing.T) *sandbox.Env {
	t.Helper()
	tools, err := testbed.ToolsDir(t.Context())
	must(t, err)
	e, err := sandbox.Start(t.Context(), sandbox.Options{
		Dir:           t.TempDir(),
		ToolsDir:      tools,
		Binaries:      sandbox.Binaries{ControllerManager: ccmBinary, Agent: agentBinary, NodeSim: nodesimBinary},
		LBHosts:       1,
		Clients:       []string{"client"},
		NodeSim:       sandbox.NodeSim{HTTPPorts: []uint16{dpHTTPNodePort}, UDPPorts: []uint16{dpUDPNodePort}},
		AdminIdentity: true, // a benchmark of the data plane, not of permissions
		Logf:          t.Logf,
	})
	must(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last lines of the agent:\n%s", testbed.LogTail(e.Agent(0).LogPath, 40))
		}
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	return e
}

// createDataPlaneService creates the LoadBalancer Service (TCP 80 and UDP
// 53) and returns its address.
func createDataPlaneService(t *testing.T, e *sandbox.Env) netip.Addr {
	t.Helper()
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "dataplane", Namespace: "default"},
		Spec: v1.ServiceSpec{
			Type:     v1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": "dataplane"},
			Ports: []v1.ServicePort{
				{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: dpHTTPNodePort},
				{Name: "udp", Protocol: v1.ProtocolUDP, Port: dpUDPPort, NodePort: dpUDPNodePort},
			},
		},
	}
	return createLoadBalancer(t, e, svc)
}

// routes holds the addresses of the router and direct paths.
type routes struct {
	client         netip.Addr // the client's second address, for the router path
	router, direct netip.Addr // on every node's loopback
}

// setUpRoutes prepares the router and the direct path so that, like the
// VIP and HAProxy, each has one address and spreads connections over the
// three nodes per flow: every node gets two more addresses on its
// loopback, one reached through the LB host as a plain router, one
// reached directly; equal-cost multipath routes with layer-4 hashing
// (fib_multipath_hash_policy=1) pick the node per connection, on the LB
// host for the router address, on the client for the direct one. The
// client talks to the router address from a second address of its own,
// which the nodes route back via the LB host: all hosts share one
// bridge, so without these /32 routes the replies would bypass it. ICMP
// redirects are off (the LB host would otherwise tell the client to go
// straight to the node) and the nodes answer ARP only for their link's
// own addresses. Everything is set inside the lab's namespaces only.
func setUpRoutes(t *testing.T, e *sandbox.Env) routes {
	t.Helper()
	client, lb := e.Clients["client"], e.LBs[0]
	subnet := e.Lab.Subnet4
	nth := func(n int) netip.Addr {
		a := subnet.Masked().Addr()
		for range n {
			a = a.Next()
		}
		return a
	}
	r := routes{client: nth(dpExtraHost), router: nth(dpExtraHost + 1), direct: nth(dpExtraHost + 2)}
	ipIn := func(h *lab.Host, args ...string) {
		t.Helper()
		if out, err := h.Command(t.Context(), "ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s in %s: %v\n%s", strings.Join(args, " "), h.Name, err, out)
		}
	}
	conf := func(h *lab.Host, key, value string) {
		t.Helper()
		for _, dev := range []string{"all", "default", h.Iface} {
			must(t, h.SetSysctl("net.ipv4.conf."+dev+"."+key, value))
		}
	}
	ecmp := func(h *lab.Host, dst netip.Addr, src netip.Addr) {
		t.Helper()
		must(t, h.SetSysctl("net.ipv4.fib_multipath_hash_policy", "1"))
		args := []string{"route", "add", dst.String() + "/32"}
		if src.IsValid() {
			args = append(args, "src", src.String())
		}
		for _, n := range e.Nodes {
			args = append(args, "nexthop", "via", n.Addr4.String(), "dev", h.Iface)
		}
		ipIn(h, args...)
	}
	conf(lb, "send_redirects", "0")
	ecmp(lb, r.router, netip.Addr{})
	ipIn(client, "addr", "add", r.client.String()+"/"+strconv.Itoa(subnet.Bits()), "dev", client.Iface)
	conf(client, "accept_redirects", "0")
	ipIn(client, "route", "add", r.router.String()+"/32", "via", lb.Addr4.String(), "dev", client.Iface, "src", r.client.String())
	ecmp(client, r.direct, client.Addr4)
	for _, n := range e.Nodes {
		conf(n, "accept_redirects", "0")
		conf(n, "arp_ignore", "1")
		ipIn(n, "addr", "add", r.router.String()+"/32", "dev", "lo")
		ipIn(n, "addr", "add", r.direct.String()+"/32", "dev", "lo")
		ipIn(n, "route", "add", r.client.String()+"/32", "via", lb.Addr4.String(), "dev", n.Iface)
	}
	return r
}

// haproxyConfig is HAProxy's configuration for the benchmark: an
// equivalent TCP load balancer on the LB host's own address.
func haproxyConfig(e *sandbox.Env) string {
	var b strings.Builder
	fmt.Fprintf(&b, `global
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
`, netip.AddrPortFrom(e.LBs[0].Addr4, dpHAProxyPort))
	for _, n := range e.Nodes {
		fmt.Fprintf(&b, "    server %s %s check\n", n.Name, netip.AddrPortFrom(n.Addr4, dpHTTPNodePort))
	}
	return b.String()
}

// startHAProxy runs HAProxy in the LB host's namespace until the test
// ends, and waits until it accepts connections.
func startHAProxy(t *testing.T, e *sandbox.Env) {
	t.Helper()
	lb := e.LBs[0]
	dir := t.TempDir()
	conf := filepath.Join(dir, "haproxy.cfg")
	must(t, os.WriteFile(conf, []byte(haproxyConfig(e)), 0o644))
	if out, err := exec.Command("haproxy", "-c", "-f", conf).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c: %v\n%s", err, out)
	}
	// -db: stay in the foreground, so the lab owns the process (and its
	// process group) and Stop ends it.
	p, err := lb.Start(context.Background(), filepath.Join(dir, "haproxy.log"), "haproxy", "-db", "-f", conf)
	if err != nil {
		t.Fatalf("start haproxy in %s: %v", lb.Name, err)
	}
	t.Cleanup(func() { _ = p.Stop() })
	addr := netip.AddrPortFrom(lb.Addr4, dpHAProxyPort)
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		conn, err := e.Clients["client"].DialTCP(ctx, addr)
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
// from every node (within some attempts), each seeing the expected client
// address (the VIP for the VIP path, the LB host for HAProxy, the client
// itself otherwise), and UDP answers.
func checkPath(t *testing.T, e *sandbox.Env, tg dpTarget) {
	t.Helper()
	hc := e.Clients["client"].HTTPClient()
	seen := map[string]bool{}
	deadline := time.Now().Add(30 * time.Second)
	var last string
	for len(seen) < len(e.Nodes) {
		if time.Now().After(deadline) {
			t.Fatalf("path %s: answers from %d of %d nodes within 30 s; last: %s", tg.path, len(seen), len(e.Nodes), last)
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
		last = strings.TrimSpace(string(body))
		var node, sees string
		if _, err := fmt.Sscanf(last, "hello from %s (you are %s", &node, &sees); err != nil {
			t.Fatalf("path %s: unexpected answer %q", tg.path, last)
		}
		if ap, err := netip.ParseAddrPort(strings.TrimSuffix(sees, ")")); err != nil || ap.Addr() != tg.sees {
			t.Fatalf("path %s: node %s saw the client as %s, want %s", tg.path, node, sees, tg.sees)
		}
		seen[node] = true
	}
	if tg.udp.IsValid() {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		reply, err := e.Clients["client"].UDPExchange(ctx, tg.udp, []byte("check"))
		cancel()
		if err != nil {
			t.Fatalf("path %s: udp: %v", tg.path, err)
		}
		if f := strings.Fields(string(reply)); len(f) != 2 || !strings.HasPrefix(f[1], tg.sees.String()+":") {
			t.Fatalf("path %s: udp answer %q, want the node to see %s", tg.path, reply, tg.sees)
		}
	}
}

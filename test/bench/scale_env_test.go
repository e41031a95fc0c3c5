package bench

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/groundcloud/groundcloud/internal/annotation"
	"github.com/groundcloud/groundcloud/test/framework/apionly"
	"github.com/groundcloud/groundcloud/test/framework/netlab"
	"github.com/groundcloud/groundcloud/test/framework/realcluster"
)

// The scale topology, on the real cluster (test/framework/realcluster): 3 workers
// with kubelet, containerd and kube-proxy carry the traffic (the sample
// Services' Pods run on them), 1 dedicated load-balancer host (a Node too,
// labelled and tainted as docs/install.md says) runs the agent, 2 late
// workers join and leave for the node churn, and 97 more Nodes are API
// objects with no kubelet: their inventory addresses are secondary
// addresses of the 3 workers, where kube-proxy serves NodePorts and its
// /healthz (nodePortAddresses covers the lab's subnet), so that every one
// of the 100 backends answers health checks and traffic like a node.
const (
	scaleNodes     = 100
	scaleRealNodes = 3
	scaleServices  = 1000
	scaleMore      = 4000
	// The step to 5,000 is bounded so that the benchmark stays within its
	// budget on a slow or busy machine: no new create after
	// moreCreateBudget, and each wait (addresses, the agent's map) ends
	// after moreWaitBudget.
	moreCreateBudget = 210 * time.Second
	moreWaitBudget   = 90 * time.Second
	scaleSample      = 50 // of the first 1,000 Services, and as many of the more
	scaleWorkers     = 32
	scaleNamespace   = "scale"
	// scaleEcho is the Deployment behind the sampled Services: one Pod on
	// each of the 3 workers.
	scaleEcho = "scale-echo"
	// apiNodeNet holds the 97 API nodes' addresses: 100.64.200.<n>.
	apiNodeNet = "100.64.200."
	// ccmPort is the controller manager's secure port (deploy/): its
	// profiles, on its Pod's address.
	ccmPort = 10258
)

var (
	// scaleSubnet is a /16 so that the pool can hold 12,000 addresses. The
	// lab lives in network namespaces with no link to the root namespace,
	// so the subnet is never routed on this machine; it is checked anyway.
	scaleSubnet = netip.MustParsePrefix("100.64.0.0/16")
	scalePool4  = "100.64.16.1-100.64.63.254"
	// churnNodes are the late workers: one joins and leaves at 1,000
	// Services, the other at 5,000.
	churnNodes = [2]string{"node-4", "node-5"}
)

type scaleEnv struct {
	c    *realcluster.Cluster
	fast kubernetes.Interface // a client that is not rate-limited
	dyn  dynamic.Interface
	lb   *realcluster.Node
	cli  *netlab.Host
	// createdAt is when each Service's create call returned.
	createdAt sync.Map
}

func startScaleEnv(t *testing.T) *scaleEnv {
	t.Helper()
	checkSubnetFree(t, scaleSubnet)
	var machines strings.Builder
	extra := map[string][]netip.Addr{}
	for n := scaleRealNodes + 1; n <= scaleNodes; n++ {
		fmt.Fprintf(&machines, "[Machine %q]\nzone = rack-2\ninstance-type = api-only\ninternal-ip = %s%d\n\n", apiNodeName(n), apiNodeNet, n)
		worker := fmt.Sprintf("node-%d", n%scaleRealNodes+1)
		extra[worker] = append(extra[worker], netip.MustParseAddr(fmt.Sprintf("%s%d", apiNodeNet, n)))
	}
	c := realcluster.StartT(t, realcluster.Options{
		Topology:         netlab.Topology{LBHosts: 1, Clients: []string{"client"}, Subnet4: scaleSubnet, Pool4: scalePool4},
		Workers:          scaleRealNodes,
		LateWorkers:      len(churnNodes),
		ExtraCloudConfig: machines.String(),
		ExtraAddresses:   extra,
		// kube-proxy serves NodePorts (and answers health checks) on the
		// API nodes' addresses too.
		NodePortAddresses:  []string{scaleSubnet.String()},
		ExtraAPIServerArgs: []string{"--service-node-port-range=20000-32767"},
		// more than 5,000 node ports
		// kube-controller-manager's client as a cluster of thousands of
		// Services needs it: at its defaults (20/s, bursts of 30) each of
		// its controllers writes 20 objects a second, and the
		// EndpointSlices that kube-proxy needs came up to 12 s (1,000
		// Services) and 33 s (5,000) after the addresses (docs/install.md,
		// Many Services).
		ExtraControllerManagerArgs: []string{"--kube-api-qps=200", "--kube-api-burst=400"},
	})
	cfg := c.CP.RESTConfig()
	cfg.QPS, cfg.Burst = 5000, 5000
	fast, err := kubernetes.NewForConfig(cfg)
	must(t, err)
	dyn, err := dynamic.NewForConfig(cfg)
	must(t, err)
	s := &scaleEnv{c: c, fast: fast, dyn: dyn, lb: c.Node("lb-1"), cli: c.Clients["client"]}
	t.Cleanup(func() { s.saveLogs(t) })
	// The agent logs each sync's parts at --v=2 and serves profiles; the
	// controller manager logs "Ensured LoadBalancer" at --v=2 and lets
	// anyone read its profiles (a benchmark of scale, not of permissions).
	setArgs(t, c, "DaemonSet", "groundcloud-agent", "--v=2", "--profiling")
	setArgs(t, c, "Deployment", "groundcloud-controller-manager", "--v=2",
		"--authorization-always-allow-paths=/healthz,/readyz,/livez,/debug/pprof/*")
	_, err = fast.CoreV1().Namespaces().Create(t.Context(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: scaleNamespace}}, metav1.CreateOptions{})
	must(t, err)
	s.deployEcho(t)
	s.addAPINodes(t)
	return s
}

// deployEcho runs groundcloud-echo on the 3 workers, behind every sampled
// Service; it is ready before the API nodes exist, which would otherwise
// be places to schedule its Pods that never run them.
func (s *scaleEnv) deployEcho(t *testing.T) {
	t.Helper()
	d := s.c.EchoDeployment(scaleNamespace, scaleEcho, scaleRealNodes)
	d.Spec.Template.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: v1.LabelHostname, WhenUnsatisfiable: v1.DoNotSchedule,
		NodeTaintsPolicy: ptr.To(v1.NodeInclusionPolicyHonor),
		LabelSelector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": scaleEcho}},
	}}
	_, err := s.fast.AppsV1().Deployments(scaleNamespace).Create(t.Context(), d, metav1.CreateOptions{})
	must(t, err)
	must(t, s.c.WaitDeploymentReady(t.Context(), scaleNamespace, scaleEcho))
}

func apiNodeName(n int) string { return fmt.Sprintf("api-node-%03d", n) }

// checkSubnetFree refuses a subnet that overlaps an address of this
// machine (the lab would not touch it, but results would be confusing).
func checkSubnetFree(t *testing.T, p netip.Prefix) {
	addrs, err := net.InterfaceAddrs()
	must(t, err)
	for _, a := range addrs {
		if pfx, err := netip.ParsePrefix(a.String()); err == nil && pfx.Overlaps(p) {
			t.Fatalf("lab subnet %s overlaps %s of this machine; choose another", p, pfx)
		}
	}
}

// addAPINodes registers the API nodes as kubelet would, keeps them Ready
// as kubelet does (a Lease each in kube-node-lease, renewed every 10 s:
// the node lifecycle controller's heartbeat) until the test ends, and
// waits until the controller manager has initialised all of them.
func (s *scaleEnv) addAPINodes(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	start := time.Now()
	names := make([]string, 0, scaleNodes-scaleRealNodes)
	for n := scaleRealNodes + 1; n <= scaleNodes; n++ {
		names = append(names, apiNodeName(n))
	}
	must(t, parallel(ctx, 8, len(names), func(ctx context.Context, i int) error {
		return apionly.RegisterNode(ctx, s.fast, names[i], v1.ConditionTrue)
	}))
	must(t, s.renewLeases(ctx, names))
	hctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-hctx.Done():
				return
			case <-time.After(10 * time.Second):
			}
			if err := s.renewLeases(hctx, names); err != nil && hctx.Err() == nil {
				t.Logf("API nodes' leases: %v", err)
			}
		}
	}()
	t.Cleanup(func() { stop(); <-done })
	must(t, parallel(ctx, 8, len(names), func(ctx context.Context, i int) error {
		return apionly.WaitInitialised(ctx, s.fast, names[i])
	}))
	t.Logf("registered and initialised %d API nodes in %s", len(names), time.Since(start).Round(time.Millisecond))
}

// renewLeases creates or renews the named nodes' Leases.
func (s *scaleEnv) renewLeases(ctx context.Context, names []string) error {
	leases := s.fast.CoordinationV1().Leases(v1.NamespaceNodeLease)
	return parallel(ctx, 8, len(names), func(ctx context.Context, i int) error {
		now := metav1.NewMicroTime(time.Now())
		l, err := leases.Get(ctx, names[i], metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = leases.Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: names[i]},
				Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(names[i]), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &now},
			}, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		l.Spec.RenewTime = &now
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		return err
	})
}

// parallel runs fn(0..n-1) on workers goroutines and returns the first error.
func parallel(ctx context.Context, workers, n int, fn func(ctx context.Context, i int) error) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		next int
		errs []error
	)
	for range workers {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				stop := len(errs) > 0
				mu.Unlock()
				if i >= n || stop {
					return
				}
				if err := fn(ctx, i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

func scaleServiceName(i int) string { return fmt.Sprintf("svc-%04d", i) }

// isSample says whether service i is one of the traffic sample (every
// 20th of the first 1,000) and which.
func isSample(i int) (int, bool) {
	if i < scaleServices && i%(scaleServices/scaleSample) == 0 {
		return i / (scaleServices / scaleSample), true
	}
	// Of the more Services, every 80th: samples scaleSample and up.
	if m := i - scaleServices; m >= 0 && m < scaleMore && m%(scaleMore/scaleSample) == 0 {
		return scaleSample + m/(scaleMore/scaleSample), true
	}
	return 0, false
}

// createServices creates services from..to-1 with scaleWorkers workers.
func (s *scaleEnv) createServices(ctx context.Context, from, to int) error {
	_, _, err := s.createServicesUntil(ctx, from, to, time.Time{})
	return err
}

// createServicesUntil creates services from..to-1 with scaleWorkers
// workers, starting no new create after deadline (zero: none), and returns
// how many it created, all of them below end.
func (s *scaleEnv) createServicesUntil(ctx context.Context, from, to int, deadline time.Time) (n, end int, err error) {
	var mu sync.Mutex
	end = from
	err = parallel(ctx, scaleWorkers, to-from, func(ctx context.Context, i int) error {
		if !deadline.IsZero() && time.Now().After(deadline) {
			return nil
		}
		if err := s.createService(ctx, from+i); err != nil {
			return err
		}
		mu.Lock()
		n, end = n+1, max(end, from+i+1)
		mu.Unlock()
		return nil
	})
	return n, end, err
}

func (s *scaleEnv) createService(ctx context.Context, i int) error {
	{
		port := v1.ServicePort{Name: "tcp", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(realcluster.EchoLinesPort)} // a greeting, which the availability client waits for
		// The sampled Services select the echo Pods; the others select
		// none (kube-proxy rejects their connections).
		app := scaleServiceName(i)
		if _, ok := isSample(i); ok {
			app = scaleEcho
		}
		svc := &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: scaleServiceName(i), Namespace: scaleNamespace,
				// Proxy forwarding, whose rules the benchmark reads (the
				// bucket maps' node addresses), as in its runs before the
				// real cluster; passthrough is the pool's default.
				Annotations: map[string]string{annotation.Forwarding: "proxy"}},
			Spec: v1.ServiceSpec{
				Type:     v1.ServiceTypeLoadBalancer,
				Selector: map[string]string{"app": app},
				Ports:    []v1.ServicePort{port},
			},
		}
		_, err := s.fast.CoreV1().Services(scaleNamespace).Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create service %d: %w", i, err)
		}
		s.createdAt.Store(svc.Name, time.Now())
		return nil
	}
}

// footprint is one process's memory and CPU.
type footprint struct {
	RSS, HWM uint64 // bytes
	// Anon and File split RSS: the heap and the runtime's other memory,
	// and the pages of the binary (and other files) it has touched.
	Anon, File uint64
	CPU        time.Duration // user + system since the process started
}

func readFootprint(pid int) (footprint, error) {
	var f footprint
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return f, err
	}
	for _, l := range strings.Split(string(status), "\n") {
		fs := strings.Fields(l)
		if len(fs) < 2 {
			continue
		}
		kb, _ := strconv.ParseUint(fs[1], 10, 64)
		switch fs[0] {
		case "VmRSS:":
			f.RSS = kb << 10
		case "VmHWM:":
			f.HWM = kb << 10
		case "RssAnon:":
			f.Anon = kb << 10
		case "RssFile:":
			f.File = kb << 10
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return f, err
	}
	// Fields after the command name (which may hold spaces): utime and
	// stime are fields 14 and 15 of the whole line, in clock ticks (100/s).
	rest := string(stat[strings.LastIndexByte(string(stat), ')')+2:])
	fs := strings.Fields(rest)
	if len(fs) < 13 {
		return f, fmt.Errorf("short /proc/%d/stat", pid)
	}
	ut, _ := strconv.ParseUint(fs[11], 10, 64)
	st, _ := strconv.ParseUint(fs[12], 10, 64)
	f.CPU = time.Duration(ut+st) * 10 * time.Millisecond
	return f, nil
}

// nft runs nft in the LB host's namespace.
func (s *scaleEnv) nft(ctx context.Context, args ...string) (string, error) {
	// Listing the whole table takes seconds at thousands of Services.
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := s.lb.Host.Command(ctx, "nft", args...).Output()
	if err != nil {
		return "", fmt.Errorf("nft %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}

// servicePorts counts the elements of the agent's dispatch map (0 when
// the table does not exist).
func (s *scaleEnv) servicePorts(ctx context.Context) int {
	out, err := s.nft(ctx, "list", "map", "ip", "groundcloud", "service-ports")
	if err != nil {
		return 0
	}
	return strings.Count(out, ": goto ")
}

// servicesWith counts the service ports of the agent's IPv4 table whose
// bucket map (their own, or the one their bucket group shares) DNATs to
// addr.
func (s *scaleEnv) servicesWith(ctx context.Context, addr netip.Addr) (int, error) {
	out, err := s.nft(ctx, "list", "table", "ip", "groundcloud")
	if err != nil {
		return 0, err
	}
	return parseListing(out).portsTo(addr), nil
}

// portsTo counts the service ports whose bucket map DNATs to addr.
func (l listing) portsTo(addr netip.Addr) int {
	n := 0
	for _, chain := range l.ports {
		if mapValueHas(l.maps[l.chainMaps[chain]], addr) {
			n++
		}
	}
	return n
}

// listing is what the benchmark reads of a listed table: each map's
// listing by name, the bucket map each chain's DNAT rule looks up, and the
// chain each element of service-ports ("VIP . protocol . port") goes to.
type listing struct {
	maps      map[string]string
	chainMaps map[string]string
	ports     map[string]string
}

func parseListing(out string) listing {
	l := listing{maps: map[string]string{}, chainMaps: map[string]string{}, ports: map[string]string{}}
	for _, block := range strings.Split(out, "\n\tmap ")[1:] {
		name, body, _ := strings.Cut(block, " {")
		body, _, _ = strings.Cut(body, "\n\t}")
		l.maps[name] = body
	}
	for _, block := range strings.Split(out, "\n\tchain ")[1:] {
		name, body, _ := strings.Cut(block, " {")
		if m := ruleMap.FindStringSubmatch(body); m != nil {
			l.chainMaps[name] = m[1]
		}
	}
	for _, m := range portElement.FindAllStringSubmatch(l.maps["service-ports"], -1) {
		l.ports[m[1]] = m[2]
	}
	return l
}

// ruleMap finds the bucket map in a service port's or a bucket group's
// DNAT rule: "... map @bkt-…", "... map @grp-…:30080" or "... map
// @grp-…:ip daddr . meta l4proto . tcp dport map @node-ports".
var ruleMap = regexp.MustCompile(`dnat (?:ip6? )?to jhash [^\n]*? map @([^\s:]+)(?::\d+|:ip6? daddr [^\n]*)?\n`)

// portElement is one element of service-ports: key and target chain.
var portElement = regexp.MustCompile(`(\S+ \. \w+ \. \d+) : goto ([^\s,}]+)`)

// mapValueHas reports whether a listed map has an element whose value is
// addr or starts with it ("addr . port").
func mapValueHas(listing string, addr netip.Addr) bool {
	return regexp.MustCompile(`: ` + regexp.QuoteMeta(addr.String()) + `([ ,\n}]|$)`).MatchString(listing)
}

// bucketMapOf is the bucket map that port 80 of the scale namespace's
// Service name DNATs through in the agent's IPv4 table (its own or its
// bucket group's).
func (s *scaleEnv) bucketMapOf(ctx context.Context, name string) (string, error) {
	svc, err := s.fast.CoreV1().Services(scaleNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if len(svc.Status.LoadBalancer.Ingress) == 0 {
		return "", fmt.Errorf("service %s has no address", name)
	}
	out, err := s.nft(ctx, "list", "table", "ip", "groundcloud")
	if err != nil {
		return "", err
	}
	l := parseListing(out)
	key := svc.Status.LoadBalancer.Ingress[0].IP + " . tcp . 80"
	m := l.chainMaps[l.ports[key]]
	if m == "" {
		return "", fmt.Errorf("no bucket map for %s (%s) in the table", name, key)
	}
	return m, nil
}

// mapHas reports whether the agent's IPv4 map name DNATs to addr.
func (s *scaleEnv) mapHas(ctx context.Context, name string, addr netip.Addr) (bool, error) {
	out, err := s.nft(ctx, "list", "map", "ip", "groundcloud", name)
	if err != nil {
		return false, err
	}
	return mapValueHas(out, addr), nil
}

// dialUntil dials addr from the client host every 10 ms (each attempt
// bounded by 200 ms) until a connection succeeds, and returns when it did.
func (s *scaleEnv) dialUntil(ctx context.Context, addr netip.AddrPort) (time.Time, error) {
	for {
		actx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		c, err := s.cli.DialTCP(actx, addr)
		cancel()
		if err == nil {
			done := time.Now()
			_ = c.Close()
			return done, nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("no connection to %s: %w (last: %v)", addr, ctx.Err(), err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func mib(b uint64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

func pollUntil(ctx context.Context, every, timeout time.Duration, cond func() bool) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if cond() {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(every):
		}
	}
}

func logFile(dir, name string) string { return filepath.Join(dir, name) }

// heapProfiles saves the controller manager's and the agent's heap
// profiles as <dir>/<label>-{controller-manager,agent}.heap when
// GROUNDCLOUD_BENCH_PROFILES names a directory (read them with
// go tool pprof -sample_index=inuse_space). Failures are logged only.
func (s *scaleEnv) heapProfiles(t *testing.T, label string) {
	s.profiles(t, label, "heap", "heap", 0, 30*time.Second)()
}

// cpuProfiles saves the controller manager's and the agent's CPU profiles
// of the span from after to after+span as <dir>/<label>-{...}.cpu when
// GROUNDCLOUD_BENCH_PROFILES names a directory; the returned function
// waits for them. Failures are logged only.
func (s *scaleEnv) cpuProfiles(t *testing.T, label string, after, span time.Duration) (wait func()) {
	return s.profiles(t, label, fmt.Sprintf("profile?seconds=%d", int(span.Seconds())), "cpu", after, span+30*time.Second)
}

// profiles fetches /debug/pprof/<path> from the leading controller
// manager (its secure port, on its Pod's address, from its node) and the
// agent (its metrics address on its host's loopback) after the given
// delay, each within timeout, into
// <dir>/<label>-{controller-manager,agent}.<ext>; the returned function
// waits for both.
func (s *scaleEnv) profiles(t *testing.T, label, path, ext string, after, timeout time.Duration) (wait func()) {
	dir := os.Getenv("GROUNDCLOUD_BENCH_PROFILES")
	if dir == "" {
		return func() {}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("profiles: %v", err)
		return func() {}
	}
	pod, _, err := s.ccmLeader(t.Context())
	if err != nil {
		t.Logf("profiles: %v", err)
		return func() {}
	}
	ccm := s.c.Node(pod.Spec.NodeName).Host.HTTPClient()
	ccm.Timeout = after + timeout
	ccm.Transport.(*http.Transport).TLSClientConfig = &tls.Config{InsecureSkipVerify: true} // its self-signed serving certificate
	agent := s.lb.Host.HTTPClient()
	agent.Timeout = after + timeout
	var wg sync.WaitGroup
	for _, p := range []struct {
		who, url string
		c        *http.Client
	}{
		{"controller-manager", fmt.Sprintf("https://%s/debug/pprof/%s", net.JoinHostPort(pod.Status.PodIP, fmt.Sprint(ccmPort)), path), ccm},
		{"agent", "http://127.0.0.1:10263/debug/pprof/" + path, agent},
	} {
		wg.Go(func() {
			select {
			case <-time.After(after):
			case <-t.Context().Done():
				return
			}
			file := filepath.Join(dir, label+"-"+p.who+"."+ext)
			body, err := get(t.Context(), p.c, p.url)
			if err == nil {
				err = os.WriteFile(file, body, 0o644)
			}
			if err != nil {
				t.Logf("profiles: %s: %v", p.who, err)
				return
			}
			t.Logf("profiles: saved %s", file)
		})
	}
	return wg.Wait
}

// saveLogs copies the given logs, by name, to <dir>/<name>.log when
// GROUNDCLOUD_BENCH_PROFILES names a directory: with the profiles, they
// say when each sync ran and how long its parts took (the agent logs at
// --v=2).
func saveLogs(t *testing.T, logs map[string]string) {
	dir := os.Getenv("GROUNDCLOUD_BENCH_PROFILES")
	if dir == "" {
		return
	}
	for name, path := range logs {
		body, err := os.ReadFile(path)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, name+".log"), body, 0o644)
		}
		if err != nil {
			t.Logf("logs: %s: %v", name, err)
		}
	}
}

// agentSyncs reads the agent's data-plane sync histogram from its
// metrics address inside its host.
func (s *scaleEnv) agentSyncs(ctx context.Context) (syncStats, error) {
	c := s.lb.Host.HTTPClient()
	c.Timeout = 30 * time.Second
	body, err := get(ctx, c, "http://127.0.0.1:10263/metrics")
	if err != nil {
		return syncStats{}, fmt.Errorf("agent metrics: %w", err)
	}
	return parseSyncStats(string(body))
}

// get returns the body of a GET of url, an error unless it is 200 OK.
func get(ctx context.Context, c *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s: %.200s", url, resp.Status, body)
	}
	return body, nil
}

// The listing parsers read both kinds of bucket map and chain: a group's
// (addresses; the NodePort from node-ports) and a service port's own
// (address . NodePort).
func TestBucketMapListing(t *testing.T) {
	const out = `table ip groundcloud {
	map grp-X6OO4N4Q-http_10256/healthz {
		typeof numgen inc mod 2 : ip daddr
		elements = { 0 : 192.0.2.11, 1 : 192.0.2.12 }
	}

	map bkt-ZYXKTAZY-scale/svc-0001/tcp/80 {
		typeof numgen inc mod 2 : ip daddr . tcp dport
		elements = { 0 : 192.0.2.12 . 30001, 1 : 192.0.2.12 . 30001 }
	}

	map service-ports {
		type ipv4_addr . inet_proto . inet_service : verdict
		comment "VIP . protocol . port to the chain that picks a backend"
		elements = { 100.64.16.1 . tcp . 80 : goto grp-X6OO4N4Q-http_10256/healthz/tcp,
			     100.64.16.2 . tcp . 80 : goto svc-B-scale/svc-0001/tcp/80,
			     100.64.16.3 . tcp . 80 : goto grp-X6OO4N4Q-http_10256/healthz/tcp }
	}

	chain grp-X6OO4N4Q-http_10256/healthz/tcp {
		dnat to jhash ip saddr . tcp sport . ip daddr . tcp dport mod 128 seed 0x67636c64 map @grp-X6OO4N4Q-http_10256/healthz:ip daddr . meta l4proto . tcp dport map @node-ports
	}

	chain svc-B-scale/svc-0001/tcp/80 {
		dnat ip to jhash ip saddr . tcp sport mod 128 seed 0x67636c64 map @bkt-ZYXKTAZY-scale/svc-0001/tcp/80
	}
}
`
	l := parseListing(out)
	wantChains := map[string]string{
		"grp-X6OO4N4Q-http_10256/healthz/tcp": "grp-X6OO4N4Q-http_10256/healthz",
		"svc-B-scale/svc-0001/tcp/80":         "bkt-ZYXKTAZY-scale/svc-0001/tcp/80",
	}
	if !maps.Equal(l.chainMaps, wantChains) {
		t.Errorf("maps of the chains %q, want %q", l.chainMaps, wantChains)
	}
	wantPorts := map[string]string{
		"100.64.16.1 . tcp . 80": "grp-X6OO4N4Q-http_10256/healthz/tcp",
		"100.64.16.2 . tcp . 80": "svc-B-scale/svc-0001/tcp/80",
		"100.64.16.3 . tcp . 80": "grp-X6OO4N4Q-http_10256/healthz/tcp",
	}
	if !maps.Equal(l.ports, wantPorts) {
		t.Errorf("service ports %q, want %q", l.ports, wantPorts)
	}
	// The old layout's rule, a chain per service port of a group, still
	// reads (a table written by an earlier agent).
	if m := ruleMap.FindStringSubmatch("dnat to jhash ip saddr . tcp sport mod 128 seed 0x68ddfeca map @grp-X6OO4N4Q-http_10256/healthz:30000\n"); m == nil || m[1] != "grp-X6OO4N4Q-http_10256/healthz" {
		t.Errorf("old group rule: %q", m)
	}
	group, own := l.maps["grp-X6OO4N4Q-http_10256/healthz"], l.maps["bkt-ZYXKTAZY-scale/svc-0001/tcp/80"]
	for _, c := range []struct {
		listing, addr string
		want          bool
	}{
		{group, "192.0.2.11", true}, {group, "192.0.2.1", false}, {own, "192.0.2.12", true}, {own, "192.0.2.11", false},
	} {
		if got := mapValueHas(c.listing, netip.MustParseAddr(c.addr)); got != c.want {
			t.Errorf("mapValueHas(%s) = %v, want %v", c.addr, got, c.want)
		}
	}
	for _, c := range []struct {
		addr string
		want int
	}{{"192.0.2.11", 2}, {"192.0.2.12", 3}, {"192.0.2.13", 0}} {
		if n := l.portsTo(netip.MustParseAddr(c.addr)); n != c.want {
			t.Errorf("service ports to %s: %d, want %d", c.addr, n, c.want)
		}
	}
}

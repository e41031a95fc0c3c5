package agent

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/testutil"
	"sigs.k8s.io/knftables"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/backends"
	"github.com/groundcloud/groundcloud/internal/dataplane"
	"github.com/groundcloud/groundcloud/internal/health"
	"github.com/groundcloud/groundcloud/internal/lbapi"
	"github.com/groundcloud/groundcloud/internal/membership"
)

// testAgent is an agent over a fake apiserver holding lbs.
func testAgent(t *testing.T, cfg Config, lbs ...*v1alpha1.LoadBalancer) *Agent {
	t.Helper()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{lbapi.Resource: "LoadBalancerList"})
	for _, lb := range lbs {
		if _, err := lbapi.NewClient(dyn).Create(t.Context(), lb); err != nil {
			t.Fatal(err)
		}
	}
	cfg.Host, cfg.Dynamic = "lb-1", dyn
	if cfg.Nodes == nil {
		cfg.Nodes = fakeNodes{kubefake.NewClientset(nodeObjects(testNodes()...)...).CoreV1().Nodes()}
	}
	if cfg.Addresses == nil {
		cfg.Addresses = noAddresses{}
	}
	if cfg.Owner == nil && cfg.Membership == nil {
		cfg.Owner = AllAddresses{}
	}
	if cfg.MinSync == 0 {
		cfg.MinSync, cfg.MaxSync = 10*time.Millisecond, time.Minute
	}
	if cfg.AnnounceEach == 0 {
		cfg.AnnounceEach = time.Hour
	}
	return New(cfg)
}

// nodeObjects are initialised Nodes, one per backend.
func nodeObjects(nodes ...backends.Backend) []runtime.Object {
	var out []runtime.Object
	for _, b := range nodes {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: b.Name}, Spec: corev1.NodeSpec{ProviderID: "groundcloud://lab/" + b.Name}}
		for _, a := range b.Addrs {
			n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a.String()})
		}
		out = append(out, n)
	}
	return out
}

// fakeNodes are a fake clientset's Nodes. Like the clientset, they say
// that their watches cannot stream a list (the informer waits forever for
// one otherwise).
type fakeNodes struct{ corev1client.NodeInterface }

func (fakeNodes) IsWatchListSemanticsUnSupported() bool { return true }

// startInformer fills the agent's caches, for tests that call sync directly.
func startInformer(t *testing.T, a *Agent) {
	t.Helper()
	go a.informer.RunWithContext(t.Context())
	go a.nodes.RunWithContext(t.Context())
	if !cache.WaitForCacheSync(t.Context().Done(), a.informer.HasSynced, a.nodes.HasSynced) {
		t.Fatal("informer did not sync")
	}
}

// runAgent runs the agent until the test ends.
func runAgent(t *testing.T, a *Agent) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		if err := a.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

type noAddresses struct{}

func (noAddresses) Set(context.Context, []netip.Addr) error { return nil }
func (noAddresses) Announce(context.Context)                {}
func (noAddresses) Present(context.Context) ([]netip.Addr, error) {
	return nil, nil
}
func (noAddresses) Cleanup(context.Context) error { return nil }

// observingMembership is a Membership of one that records what syncs
// tell it.
type observingMembership struct {
	AllAddresses
	mu  sync.Mutex
	obs []membership.Observation
}

func (c *observingMembership) Run(ctx context.Context, _ membership.Hooks) error {
	<-ctx.Done()
	return nil
}

func (c *observingMembership) Observe(o membership.Observation) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.obs = append(c.obs, o)
}

func (c *observingMembership) Successor(netip.Addr, bool) string { return "" }

func (c *observingMembership) Status() membership.Status {
	return membership.Status{State: membership.StateReady}
}

// failingConntrack fails every deletion.
type failingConntrack struct{ calls int }

func (f *failingConntrack) DeleteUDPFlows(context.Context, []dataplane.Flow) error {
	f.calls++
	return errors.New("injected conntrack failure")
}

// A failed conntrack clean-up neither fails the sync nor makes the host
// unhealthy (which would drop its addresses); it is counted and retried.
func TestConntrackCleanupErrorKeepsTheHostHealthy(t *testing.T) {
	udp := func(lb *v1alpha1.LoadBalancer) {
		lb.Spec.Ports = []v1alpha1.Port{{Name: "dns", Protocol: "UDP", Port: 53, NodePort: 30053}}
		lb.Spec.HealthCheck = nil
	}
	ct := &failingConntrack{}
	owner := &observingMembership{}
	syncer := dataplane.NewSyncer(knftables.NewFake(knftables.IPv4Family, dataplane.TableName), knftables.NewFake(knftables.IPv6Family, dataplane.TableName), nil, ct)
	lb := newLB("dns", udp)
	a := testAgent(t, Config{DataPlane: syncer, Membership: owner}, lb)
	startInformer(t, a)
	if err := a.sync(t.Context()); err != nil {
		t.Fatalf("first sync: %v", err)
	}

	// node-2 leaves: its UDP flows are stale, and deleting them fails.
	if err := a.cfg.Nodes.(fakeNodes).Delete(t.Context(), "node-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the cache to see the Node go", func() bool {
		nodes, err := a.nodeList.List(labels.Everything())
		return err == nil && len(nodes) == 1
	})
	RegisterMetrics() // unregistered metrics do not count
	before, _ := testutil.GetCounterMetricValue(conntrackCleanupErrors.WithLabelValues(cleanupStaleUDP))
	if err := a.sync(t.Context()); err != nil {
		t.Errorf("the sync failed because the conntrack clean-up did: %v", err)
	}
	if ct.calls == 0 {
		t.Fatal("no conntrack clean-up was attempted")
	}
	owner.mu.Lock()
	last := owner.obs[len(owner.obs)-1]
	owner.mu.Unlock()
	if last.DataPlaneErr != nil {
		t.Errorf("the host reports its data plane failed (it would drop its addresses): %v", last.DataPlaneErr)
	}
	after, _ := testutil.GetCounterMetricValue(conntrackCleanupErrors.WithLabelValues(cleanupStaleUDP))
	if after != before+1 {
		t.Errorf("conntrack_cleanup_errors_total{kind=stale-udp} went from %v to %v, want one more", before, after)
	}
	calls := ct.calls
	if err := a.sync(t.Context()); err != nil {
		t.Errorf("sync: %v", err)
	}
	if ct.calls == calls {
		t.Error("the failed clean-up is not retried by the next sync")
	}
}

// recordingDataPlane records the States it is given; while block is set,
// Sync waits for it to be closed.
type recordingDataPlane struct {
	mu     sync.Mutex
	states []dataplane.State
	block  chan struct{}
}

func (d *recordingDataPlane) Sync(ctx context.Context, st dataplane.State) (dataplane.Result, error) {
	d.mu.Lock()
	d.states = append(d.states, st)
	block := d.block
	d.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
		}
	}
	return dataplane.Result{}, nil
}

func (d *recordingDataPlane) ForceFullSync()                {}
func (d *recordingDataPlane) Cleanup(context.Context) error { return nil }

func (d *recordingDataPlane) synced() []dataplane.State {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]dataplane.State(nil), d.states...)
}

// healthServer answers health checks on addr:port with code.
func healthServer(t *testing.T, addr string, port int, code int) int {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) }), ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

// A new LoadBalancer's nodes are programmed only as their first probe says:
// a node whose health check fails (externalTrafficPolicy Local, no
// endpoint there) never gets new flows, not even before its probes.
func TestNewNodesAreProgrammedAfterTheirFirstProbe(t *testing.T) {
	t.Run("probes back after the translation", func(t *testing.T) { testFirstProbe(t, false) })
	// The first probes start when the targets are set and can be back
	// before plan looks at them again (a CI run found it).
	t.Run("probes back before plan looks again", func(t *testing.T) { testFirstProbe(t, true) })
}

func testFirstProbe(t *testing.T, probedFirst bool) {
	if probedFirst {
		afterSetTargets = func(c *health.Checker, ts []health.Target) {
			deadline := time.Now().Add(10 * time.Second)
			for slices.ContainsFunc(ts, func(t health.Target) bool { return c.State(t) == health.Unknown }) && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
		}
		t.Cleanup(func() { afterSetTargets = func(*health.Checker, []health.Target) {} })
	}
	// node-1 (127.0.0.1) has no endpoint: 503; node-2 (127.0.0.2) has one.
	port := healthServer(t, "127.0.0.1", 0, http.StatusServiceUnavailable)
	healthServer(t, "127.0.0.2", port, http.StatusOK)
	local := func(lb *v1alpha1.LoadBalancer) {
		lb.Spec.HealthCheck = &v1alpha1.HealthCheck{Port: int32(port), Path: "/healthz"}
		lb.Spec.ExternalTrafficPolicy = "Local"
	}
	dp := &recordingDataPlane{}
	kube := kubefake.NewClientset(nodeObjects(node("node-1", "127.0.0.1"), node("node-2", "127.0.0.2"))...)
	a := testAgent(t, Config{DataPlane: dp, Nodes: fakeNodes{kube.CoreV1().Nodes()}, Health: health.Options{Interval: time.Minute, Timeout: 10 * time.Second, FailureThreshold: 2}}, newLB("local", local))
	runAgent(t, a)
	waitFor(t, "a first sync", func() bool { return len(dp.synced()) > 0 })
	for i, st := range dp.synced() {
		for _, svc := range st.Services {
			for _, b := range svc.Backends {
				if want := b.Node == "node-2"; b.Healthy != want {
					t.Errorf("sync %d programmed %s with healthy=%v, want %v", i+1, b.Node, b.Healthy, want)
				}
			}
		}
	}
}

// /healthz follows the sync loop: it fails while a sync hangs, and is ok
// again once the loop moves. /readyz fails until a sync has programmed
// the data plane.
func TestHealthzFailsWhileTheSyncLoopIsStuck(t *testing.T) {
	dp := &recordingDataPlane{block: make(chan struct{})}
	a := testAgent(t, Config{DataPlane: dp, MinSync: 10 * time.Millisecond, MaxSync: 100 * time.Millisecond}, newLB("web", func(lb *v1alpha1.LoadBalancer) { lb.Spec.HealthCheck = nil }))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	if err := serveMetrics(t.Context(), addr, false, a.Stuck, a.Ready); err != nil {
		t.Fatal(err)
	}
	get := func(path string) int {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	healthz := func() int { return get("/healthz") }
	if code := get("/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz before a sync: %d, want 503", code)
	}
	if code := healthz(); code != http.StatusOK {
		t.Errorf("/healthz before the agent runs: %d, want 200", code)
	}
	runAgent(t, a)
	waitFor(t, "/healthz to fail while the first sync hangs", func() bool { return healthz() == http.StatusInternalServerError })
	dp.mu.Lock()
	close(dp.block)
	dp.block = nil
	dp.mu.Unlock()
	waitFor(t, "/healthz to be ok once syncs run", func() bool { return healthz() == http.StatusOK })
	waitFor(t, "/readyz to be ok once a sync programmed the data plane", func() bool { return get("/readyz") == http.StatusOK })
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

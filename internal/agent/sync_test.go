package agent

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/testutil"
	"sigs.k8s.io/knftables"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/dataplane"
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
	if cfg.Addresses == nil {
		cfg.Addresses = noAddresses{}
	}
	if cfg.Owner == nil && cfg.Cluster == nil {
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

// startInformer fills the agent's cache, for tests that call sync directly.
func startInformer(t *testing.T, a *Agent) {
	t.Helper()
	go a.informer.RunWithContext(t.Context())
	if !cache.WaitForCacheSync(t.Context().Done(), a.informer.HasSynced) {
		t.Fatal("informer did not sync")
	}
}

type noAddresses struct{}

func (noAddresses) Set(context.Context, []netip.Addr) error { return nil }
func (noAddresses) Announce(context.Context)                {}
func (noAddresses) Cleanup(context.Context) error           { return nil }

// observingCluster is a Cluster of one that records what syncs tell it.
type observingCluster struct {
	AllAddresses
	mu  sync.Mutex
	obs []membership.Observation
}

func (c *observingCluster) Run(ctx context.Context, _ membership.Hooks) error {
	<-ctx.Done()
	return nil
}

func (c *observingCluster) Observe(o membership.Observation) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.obs = append(c.obs, o)
}

func (c *observingCluster) Status() membership.Status {
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
	cluster := &observingCluster{}
	syncer := dataplane.NewSyncer(knftables.NewFake(knftables.IPv4Family, dataplane.TableName), knftables.NewFake(knftables.IPv6Family, dataplane.TableName), ct)
	lb := newLB("dns", udp)
	a := testAgent(t, Config{DataPlane: syncer, Cluster: cluster}, lb)
	startInformer(t, a)
	if err := a.sync(t.Context()); err != nil {
		t.Fatalf("first sync: %v", err)
	}

	// node-2 leaves: its UDP flows are stale, and deleting them fails.
	lb.Spec.Backends = lb.Spec.Backends[:1]
	lb.Generation++
	if _, err := lbapi.NewClient(a.cfg.Dynamic).Update(t.Context(), lb); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the cache to see the update", func() bool {
		cur, err := a.lister.Get("default", "dns")
		return err == nil && len(cur.Spec.Backends) == 1
	})
	RegisterMetrics() // unregistered metrics do not count
	before, _ := testutil.GetCounterMetricValue(conntrackCleanupErrors.WithLabelValues(cleanupStaleUDP))
	if err := a.sync(t.Context()); err != nil {
		t.Errorf("the sync failed because the conntrack clean-up did: %v", err)
	}
	if ct.calls == 0 {
		t.Fatal("no conntrack clean-up was attempted")
	}
	cluster.mu.Lock()
	last := cluster.obs[len(cluster.obs)-1]
	cluster.mu.Unlock()
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

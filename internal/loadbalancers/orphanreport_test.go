package loadbalancers

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics/testutil"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/config"
	"github.com/groundcloud/groundcloud/internal/lbapi"
)

const shrunkConfig = "[Global]\nregion = lab\n\n[Pool \"default\"]\naddresses = 192.0.2.201/32\n"

func mustParse(t *testing.T, text string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("test", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// emulateStatusApply makes the fake answer a server-side apply of a
// LoadBalancer's status as the apiserver does for the controller manager,
// whose field manager owns only the AddressOrphaned condition: that
// condition is replaced by the applied ones, or removed; the rest of the
// status stays. (The fake's own apply is a strategic merge, which
// unstructured objects do not support.) The real apiserver is in the
// end-to-end test.
func emulateStatusApply(dyn *dynamicfake.FakeDynamicClient) {
	dyn.PrependReactor("patch", "loadbalancers", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.PatchAction)
		if p.GetSubresource() != "status" || p.GetPatchType() != types.ApplyPatchType {
			return false, nil, nil
		}
		applied := &unstructured.Unstructured{}
		if err := applied.UnmarshalJSON(p.GetPatch()); err != nil {
			return true, nil, err
		}
		obj, err := dyn.Tracker().Get(lbapi.Resource, p.GetNamespace(), p.GetName())
		if err != nil {
			return true, nil, err
		}
		u := obj.(*unstructured.Unstructured).DeepCopy()
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		conds = slices.DeleteFunc(conds, func(c any) bool { return c.(map[string]any)["type"] == v1alpha1.ConditionAddressOrphaned })
		mine, _, _ := unstructured.NestedSlice(applied.Object, "status", "conditions")
		if err := unstructured.SetNestedSlice(u.Object, append(conds, mine...), "status", "conditions"); err != nil {
			return true, nil, err
		}
		return true, u, dyn.Tracker().Update(lbapi.Resource, u, p.GetNamespace())
	})
}

// startManagerWith starts a Manager whose cloud-config is what cfg holds
// at each moment, as a reloading watcher's is.
// Stop stops it and waits until it has.
func startManagerWith(t *testing.T, dyn *dynamicfake.FakeDynamicClient, cfg *atomic.Pointer[config.Config], events EventRecorder) (m *Manager, stop func()) {
	t.Helper()
	m = NewManager(dyn, cfg.Load, events)
	m.install = func(context.Context) error { return nil }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Run(ctx)
	}()
	stop = func() {
		cancel()
		<-done
	}
	t.Cleanup(stop)
	waitFor(t, "manager ready", m.isReady)
	return m, stop
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// statusPatches lists the status applies among the fake's actions, each as
// "name: type=status/reason" of the conditions it sets ("name: " for none).
func statusPatches(t *testing.T, dyn *dynamicfake.FakeDynamicClient) []string {
	t.Helper()
	var out []string
	for _, a := range dyn.Actions() {
		p, ok := a.(k8stesting.PatchAction)
		if !ok || p.GetSubresource() != "status" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(p.GetPatch()); err != nil {
			t.Fatalf("patch of %s: %v", p.GetName(), err)
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		var cs []string
		for _, c := range conds {
			m := c.(map[string]any)
			cs = append(cs, m["type"].(string)+"="+m["status"].(string)+"/"+m["reason"].(string))
		}
		out = append(out, p.GetName()+": "+strings.Join(cs, ","))
	}
	return out
}

// drain returns the events recorded so far.
func drain(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func orphanedMetric(t *testing.T, pool string) float64 {
	t.Helper()
	v, err := testutil.GetGaugeMetricValue(orphanedAddressesGauge.WithLabelValues(pool))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestOrphanReported: a pool reload that leaves a Service's address outside
// the pool sets the metric, writes the AddressOrphaned condition (status
// only, as its own field manager) and a Warning Event on the Service, once;
// a restart writes nothing again; the range coming back removes the
// condition, with a Normal Event, and the metric drops to 0.
func TestOrphanReported(t *testing.T) {
	RegisterMetrics()
	ctx := context.Background()
	dyn := newFakeDynamic()
	emulateStatusApply(dyn)
	var cfg atomic.Pointer[config.Config]
	cfg.Store(mustParse(t, poolConfig))
	events := record.NewFakeRecorder(100)
	m, stop := startManagerWith(t, dyn, &cfg, events)

	if _, err := m.Ensure(ctx, newSvc("web"), nil); err != nil {
		t.Fatal(err)
	}
	waitCached(t, m, 1)
	if got := orphanedMetric(t, "default"); got != 0 {
		t.Errorf("orphaned addresses before the reload = %v, want 0", got)
	}

	// The pool shrinks: the reload loop notices without any Ensure.
	cfg.Store(mustParse(t, shrunkConfig))
	waitFor(t, "the condition written", func() bool { return len(statusPatches(t, dyn)) > 0 })
	waitFor(t, "the Warning event", func() bool { return len(events.Events) > 0 })
	if diff := cmp.Diff([]string{"web: AddressOrphaned=True/AddressNotInPool"}, statusPatches(t, dyn)); diff != "" {
		t.Errorf("status writes (-want +got):\n%s", diff)
	}
	evs := drain(events)
	if len(evs) != 1 || !strings.HasPrefix(evs[0], "Warning AddressOrphaned 192.0.2.200 kept outside the pools: 192.0.2.200 is not in pool \"default\"") {
		t.Errorf("events = %q, want one Warning AddressOrphaned naming the address", evs)
	}
	if got := orphanedMetric(t, "default"); got != 1 {
		t.Errorf("orphaned addresses = %v, want 1", got)
	}

	// Re-ensured unchanged: kept, and reported no more.
	waitFor(t, "the condition cached", func() bool {
		lb, _ := m.lister.Get("default", "web")
		return lb != nil && len(lb.Status.Conditions) == 1
	})
	dyn.ClearActions()
	st, err := m.Ensure(ctx, newSvc("web"), nil)
	if err != nil || st.Ingress[0].IP != "192.0.2.200" {
		t.Fatalf("re-ensure of the orphan = %+v, %v; want 192.0.2.200 kept", st, err)
	}
	stop() // a restart, over the same objects
	m, _ = startManagerWith(t, dyn, &cfg, events)
	if _, err := m.Ensure(ctx, newSvc("web"), nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * poolCheckInterval) // give a wrong write time to happen
	if w := apiWrites(dyn); len(w) != 0 {
		t.Errorf("re-ensure and restart wrote %v, want nothing", w)
	}
	if evs := drain(events); len(evs) != 0 {
		t.Errorf("re-ensure and restart recorded %q, want nothing", evs)
	}

	// The range is back: the condition goes, with a Normal event.
	cfg.Store(mustParse(t, poolConfig))
	waitFor(t, "the condition removed", func() bool { return len(statusPatches(t, dyn)) > 0 })
	waitFor(t, "the Normal event", func() bool { return len(events.Events) > 0 })
	time.Sleep(3 * poolCheckInterval) // give a second write time to happen
	if diff := cmp.Diff([]string{"web: "}, statusPatches(t, dyn)); diff != "" {
		t.Errorf("status writes (-want +got):\n%s", diff)
	}
	if evs := drain(events); len(evs) != 1 || !strings.HasPrefix(evs[0], "Normal AddressOrphanResolved ") {
		t.Errorf("events = %q, want one Normal AddressOrphanResolved", evs)
	}
	lb, _ := m.lister.Get("default", "web")
	if lb == nil || len(lb.Status.Conditions) != 0 {
		t.Errorf("LoadBalancer after the range came back: %+v, want no condition", lb)
	}
	if got := orphanedMetric(t, "default"); got != 0 {
		t.Errorf("orphaned addresses after the range came back = %v, want 0", got)
	}
}

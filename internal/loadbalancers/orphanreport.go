package loadbalancers

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/ipam"
)

// EventRecorder records Events; client-go's record.EventRecorder is one.
type EventRecorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any)
}

// discardEvents records nothing.
type discardEvents struct{}

func (discardEvents) Eventf(runtime.Object, string, string, string, ...any) {}

const (
	// poolCheckInterval is how often the report loop looks for reloaded
	// pools when no Ensure has applied them yet.
	poolCheckInterval = time.Second
	// orphanRetry is how soon a report that could not write everything,
	// or found an orphan whose LoadBalancer is not cached yet, runs again.
	orphanRetry = 5 * time.Second
)

// orphanReporter is the state of the orphan reports.
type orphanReporter struct {
	wake chan struct{} // a report is due
	// last are the orphans of the last report, by Service. Guarded by
	// Manager.mu.
	last map[types.NamespacedName]ipam.Orphan
	// written are the conditions written since the cache last showed
	// them, by LoadBalancer UID (nil: removed). Only the report loop uses it.
	written map[types.UID]*metav1.Condition
}

func newOrphanReporter() *orphanReporter {
	return &orphanReporter{
		wake:    make(chan struct{}, 1),
		last:    map[types.NamespacedName]ipam.Orphan{},
		written: map[types.UID]*metav1.Condition{},
	}
}

// due asks for a report; it never blocks.
func (r *orphanReporter) due() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// noteOrphan asks for a report when key's orphan state differs from the
// last report's. Callers hold mu.
func (m *Manager) noteOrphan(key types.NamespacedName) {
	o, is := m.alloc.OrphanOf(key)
	prev, was := m.orphans.last[key]
	if is != was || (is && !sameOrphan(o, prev)) {
		m.orphans.due()
	}
}

// reportOrphans reports orphans after the rebuild, after each pool reload
// and whenever an Ensure or Delete changes one, until ctx ends.
func (m *Manager) reportOrphans(ctx context.Context) {
	tick := time.NewTicker(poolCheckInterval)
	defer tick.Stop()
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			m.mu.Lock()
			reloaded := m.refreshPools()
			m.mu.Unlock()
			if !reloaded {
				continue
			}
		case <-m.orphans.wake:
		case <-retry:
		}
		retry = nil
		if !m.syncOrphans(ctx) {
			retry = time.After(orphanRetry)
		}
	}
}

// syncOrphans logs new and resolved orphans, sets the metric, and writes
// each LoadBalancer's AddressOrphaned condition that is not what it should
// be, with an Event on its Service. It reports whether it did everything.
func (m *Manager) syncOrphans(ctx context.Context) bool {
	logger := klog.FromContext(ctx)
	m.mu.Lock()
	var pools []string
	for _, p := range m.poolsFrom.Pools {
		pools = append(pools, p.Name)
	}
	orphans := m.alloc.Orphans()
	changed, resolved := orphanTransitions(m.orphans.last, orphans)
	m.orphans.last = make(map[types.NamespacedName]ipam.Orphan, len(orphans))
	for _, o := range orphans {
		m.orphans.last[o.Key] = o
	}
	m.mu.Unlock()

	recordOrphans(pools, orphanedAddresses(orphans))
	for _, o := range changed {
		logger.Error(nil, "Address kept outside the pools; the operator must resolve it", "service", o.Key,
			"addresses", o.Allocation.Addresses, "pool", o.Allocation.Pool, "cause", o.Cause, "reason", o.Reason)
	}
	for _, k := range resolved {
		logger.Info("Orphaned address resolved", "service", k)
	}

	lbs, err := m.lister.List()
	if err != nil {
		logger.Error(err, "Cannot list LoadBalancers to report orphaned addresses")
		return false
	}
	changes, missing := planOrphanConditions(orphans, lbs, m.orphans.written, metav1.Now())
	done := len(missing) == 0
	for _, c := range changes {
		if err := m.writeOrphanCondition(ctx, c); err != nil {
			logger.Error(err, "Cannot write the AddressOrphaned condition", "loadBalancer", klog.KObj(c.lb))
			done = false
		}
	}
	m.forgetWritten(lbs)
	return done
}

// writeOrphanCondition applies the change to the LoadBalancer's status, as
// field manager FieldManager, which owns only this condition there (agents
// own the rest of the status), and records an Event on the Service.
func (m *Manager) writeOrphanCondition(ctx context.Context, c orphanChange) error {
	st := v1alpha1.LoadBalancerStatus{}
	if c.condition != nil {
		st.Conditions = []metav1.Condition{*c.condition}
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		return fmt.Errorf("convert status: %w", err)
	}
	if err := m.client.ApplyStatus(ctx, c.lb.Namespace, c.lb.Name, FieldManager, obj); err != nil {
		return fmt.Errorf("apply status of LoadBalancer %s/%s: %w", c.lb.Namespace, c.lb.Name, err)
	}
	writes.WithLabelValues("patch").Inc()
	m.orphans.written[c.lb.UID] = c.condition
	svc := serviceRef(c.lb)
	if c.condition != nil {
		m.events.Eventf(svc, v1.EventTypeWarning, ReasonAddressOrphaned, "%s", c.condition.Message)
	} else {
		m.events.Eventf(svc, v1.EventTypeNormal, ReasonAddressOrphanResolved, "The Service's addresses are in a pool its namespace may use again")
	}
	return nil
}

// forgetWritten drops what the cache now shows, and what it no longer has.
func (m *Manager) forgetWritten(lbs []*v1alpha1.LoadBalancer) {
	present := make(map[types.UID]*v1alpha1.LoadBalancer, len(lbs))
	for _, lb := range lbs {
		present[lb.UID] = lb
	}
	for uid, w := range m.orphans.written {
		lb, ok := present[uid]
		if !ok {
			delete(m.orphans.written, uid)
			continue
		}
		cur := meta.FindStatusCondition(lb.Status.Conditions, v1alpha1.ConditionAddressOrphaned)
		if (w == nil && cur == nil) || (w != nil && sameCondition(cur, w)) {
			delete(m.orphans.written, uid)
		}
	}
}

// serviceRef is the Service that owns lb, for an Event.
func serviceRef(lb *v1alpha1.LoadBalancer) *v1.ObjectReference {
	ref := &v1.ObjectReference{APIVersion: "v1", Kind: "Service", Namespace: lb.Namespace, Name: lb.Name}
	for _, o := range lb.OwnerReferences {
		if o.APIVersion == "v1" && o.Kind == "Service" && o.Name == lb.Name {
			ref.UID = o.UID
		}
	}
	return ref
}

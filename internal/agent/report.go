package agent

import (
	"context"
	"net/netip"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
)

// reportWorkers is how many status writes are in flight at once.
const reportWorkers = 8

// statusReport is what one sync found, to be written to the
// LoadBalancers' status.
type statusReport struct {
	lbs   []*v1alpha1.LoadBalancer
	owned []netip.Addr
	// announced are the addresses this host advertises over BGP.
	announced []netip.Addr
	err       error
	problems  map[string]Problems // by namespace/name
}

// reportQueue hands the latest report from the sync loop to the status
// writer: a sync never waits for status writes (at 1,000 LoadBalancers
// those took seconds and delayed the next sync), and a report that was not
// written yet when a newer one came is replaced by it.
type reportQueue struct {
	mu      sync.Mutex
	pending *statusReport
	wake    chan struct{}

	// written is, per LoadBalancer, the status this agent last wrote and
	// the resourceVersion of the cached object it was computed from. Until
	// the cache shows a newer version (normally our own write coming back
	// through the watch) a report that wants the same status again is not
	// written again. Without it every report (up to ten a second) wrote
	// again what the apiserver had not echoed yet, and at 1,000
	// LoadBalancers those duplicates slowed the apiserver, and with it the
	// watch, further.
	wmu     sync.Mutex
	written map[types.NamespacedName]writtenStatus
}

type writtenStatus struct {
	resourceVersion string
	status          v1alpha1.LoadBalancerStatus
}

func newReportQueue() reportQueue {
	return reportQueue{wake: make(chan struct{}, 1), written: map[types.NamespacedName]writtenStatus{}}
}

// inFlight reports whether st was written already for the version of lb
// in the cache.
func (q *reportQueue) inFlight(lb *v1alpha1.LoadBalancer, st v1alpha1.LoadBalancerStatus) bool {
	q.wmu.Lock()
	defer q.wmu.Unlock()
	w, ok := q.written[types.NamespacedName{Namespace: lb.Namespace, Name: lb.Name}]
	return ok && w.resourceVersion == lb.ResourceVersion && covers(w.status, st)
}

// wrote remembers that st was written for lb's cached version.
func (q *reportQueue) wrote(lb *v1alpha1.LoadBalancer, st v1alpha1.LoadBalancerStatus) {
	q.wmu.Lock()
	defer q.wmu.Unlock()
	q.written[types.NamespacedName{Namespace: lb.Namespace, Name: lb.Name}] = writtenStatus{lb.ResourceVersion, st}
}

// forget drops what wrote remembered for lb.
func (q *reportQueue) forget(lb *v1alpha1.LoadBalancer) {
	q.wmu.Lock()
	defer q.wmu.Unlock()
	delete(q.written, types.NamespacedName{Namespace: lb.Namespace, Name: lb.Name})
}

// prune forgets the LoadBalancers that are gone, and the writes whose
// object lbs (the cache) already has in a newer version: inFlight never
// matches those again, and at thousands of LoadBalancers holding every
// status written was megabytes.
func (q *reportQueue) prune(lbs []*v1alpha1.LoadBalancer) {
	live := make(map[types.NamespacedName]string, len(lbs))
	for _, lb := range lbs {
		live[types.NamespacedName{Namespace: lb.Namespace, Name: lb.Name}] = lb.ResourceVersion
	}
	q.wmu.Lock()
	defer q.wmu.Unlock()
	for k, w := range q.written {
		if rv, ok := live[k]; !ok || rv != w.resourceVersion {
			delete(q.written, k)
		}
	}
}

func (q *reportQueue) put(r statusReport) {
	q.mu.Lock()
	q.pending = &r
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *reportQueue) take() (statusReport, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.pending == nil {
		return statusReport{}, false
	}
	r := *q.pending
	q.pending = nil
	return r, true
}

// reportLoop writes the reports until ctx ends.
func (a *Agent) reportLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.reports.wake:
		}
		if r, ok := a.reports.take(); ok {
			a.report(ctx, r.lbs, r.owned, r.announced, r.err, r.problems)
			a.reports.prune(r.lbs)
		}
	}
}

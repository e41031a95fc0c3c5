package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// writes counts the apiserver's write requests (every verb but GET, LIST,
// WATCH) by "resource" or "resource/subresource", from its own
// apiserver_request_total.
type writes map[string]int

func readWrites(ctx context.Context, c kubernetes.Interface) (writes, error) {
	body, err := c.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("apiserver metrics: %w", err)
	}
	w := writes{}
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		labels := map[string]string{}
		for _, kv := range strings.Split(line[len("apiserver_request_total{"):end], ",") {
			k, v, _ := strings.Cut(kv, "=")
			labels[k] = strings.Trim(v, `"`)
		}
		switch labels["verb"] {
		case "GET", "LIST", "WATCH", "CONNECT":
			continue
		}
		n, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			continue
		}
		key := labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		w[key] += int(n)
	}
	return w, nil
}

// minus is w - old, without zero entries.
func (w writes) minus(old writes) writes {
	d := writes{}
	for k, n := range w {
		if n-old[k] != 0 {
			d[k] = n - old[k]
		}
	}
	return d
}

// components is the sum over the resources our components write when
// Services come and go (not leases: leader election renews them all the
// time; not what the benchmark itself writes: services, nodes,
// namespaces).
func (w writes) components() int {
	return w["loadbalancers"] + w["loadbalancers/status"] + w["services/status"] + w["events"]
}

// loadBalancers is the sum of the writes to LoadBalancer objects and their
// status.
func (w writes) loadBalancers() int {
	return w["loadbalancers"] + w["loadbalancers/status"]
}

func (w writes) String() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(w)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, w[k]))
	}
	return strings.Join(parts, " ")
}

// quiesce waits until the components' write counters have not moved for
// quiet, and returns the counters then; ok is false when that did not
// happen within timeout (the counters are returned anyway).
func quiesce(ctx context.Context, c kubernetes.Interface, quiet, timeout time.Duration) (writes, bool, error) {
	deadline := time.Now().Add(timeout)
	last, err := readWrites(ctx, c)
	if err != nil {
		return nil, false, err
	}
	since := time.Now()
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return last, false, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
		cur, err := readWrites(ctx, c)
		if err != nil {
			return nil, false, err
		}
		if cur.components() != last.components() {
			last, since = cur, time.Now()
			continue
		}
		if time.Since(since) >= quiet {
			return cur, true, nil
		}
	}
	return last, false, nil
}

// addressWatch records when each Service of the scale namespace first had
// an ingress address, and tells waiters.
type addressWatch struct {
	mu      sync.Mutex
	at      map[string]time.Time
	ip      map[string]string
	waiters map[string]chan struct{}
	// endpoints is when each Service first had a ready endpoint in an
	// EndpointSlice (kube-controller-manager's), which kube-proxy needs to
	// forward its NodePort to a Pod.
	endpoints map[string]time.Time
	stop      context.CancelFunc
}

func watchAddresses(ctx context.Context, c kubernetes.Interface) (*addressWatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &addressWatch{at: map[string]time.Time{}, ip: map[string]string{}, waiters: map[string]chan struct{}{},
		endpoints: map[string]time.Time{}, stop: cancel}
	f := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithNamespace(scaleNamespace))
	inf := f.Core().V1().Services().Informer()
	slices := f.Discovery().V1().EndpointSlices().Informer()
	seeSlice := func(obj any) {
		es, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok {
			return
		}
		for _, e := range es.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				w.sawEndpoints(es.Labels[discoveryv1.LabelServiceName])
				return
			}
		}
	}
	if _, err := slices.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    seeSlice,
		UpdateFunc: func(_, cur any) { seeSlice(cur) },
	}); err != nil {
		cancel()
		return nil, err
	}
	see := func(obj any) {
		if svc, ok := obj.(*v1.Service); ok && len(svc.Status.LoadBalancer.Ingress) > 0 {
			w.saw(svc.Name, svc.Status.LoadBalancer.Ingress[0].IP)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    see,
		UpdateFunc: func(_, cur any) { see(cur) },
	}); err != nil {
		cancel()
		return nil, err
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced, slices.HasSynced) {
		cancel()
		return nil, fmt.Errorf("service and EndpointSlice informers did not sync")
	}
	return w, nil
}

func (w *addressWatch) saw(name, ip string) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.at[name]; ok {
		return
	}
	w.at[name], w.ip[name] = now, ip
	if ch, ok := w.waiters[name]; ok {
		close(ch)
	}
}

func (w *addressWatch) sawEndpoints(name string) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.endpoints[name]; !ok && name != "" {
		w.endpoints[name] = now
	}
}

// endpointsAt is when name first had a ready endpoint (zero: not seen).
func (w *addressWatch) endpointsAt(name string) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.endpoints[name]
}

// wait returns when name got its address and which, or an error when ctx ends.
func (w *addressWatch) wait(ctx context.Context, name string) (time.Time, string, error) {
	w.mu.Lock()
	if at, ok := w.at[name]; ok {
		ip := w.ip[name]
		w.mu.Unlock()
		return at, ip, nil
	}
	ch, ok := w.waiters[name]
	if !ok {
		ch = make(chan struct{})
		w.waiters[name] = ch
	}
	w.mu.Unlock()
	select {
	case <-ch:
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.at[name], w.ip[name], nil
	case <-ctx.Done():
		return time.Time{}, "", fmt.Errorf("service %s got no address: %w", name, ctx.Err())
	}
}

// count is how many of the services from..to-1 have an address, and the
// latest time one got it.
func (w *addressWatch) count(from, to int) (int, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, last := 0, time.Time{}
	for i := from; i < to; i++ {
		if at, ok := w.at[scaleServiceName(i)]; ok {
			n++
			if at.After(last) {
				last = at
			}
		}
	}
	return n, last
}

// syncStats are the agent's data-plane syncs: how many, and their wall
// time in all (its groundcloud_agent_sync_duration_seconds histogram).
type syncStats struct {
	count int
	sum   time.Duration
}

func (s syncStats) minus(old syncStats) syncStats {
	return syncStats{count: s.count - old.count, sum: s.sum - old.sum}
}

// mean is the mean wall time of a sync (0 with none).
func (s syncStats) mean() time.Duration {
	if s.count == 0 {
		return 0
	}
	return s.sum / time.Duration(s.count)
}

// parseSyncStats reads the sync histogram's count and sum from the
// agent's metrics text.
func parseSyncStats(body string) (syncStats, error) {
	var st syncStats
	var seen int
	for _, line := range strings.Split(body, "\n") {
		name, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		switch name {
		case "groundcloud_agent_sync_duration_seconds_count":
			if err != nil {
				return st, fmt.Errorf("%s: %w", name, err)
			}
			st.count, seen = int(v), seen+1
		case "groundcloud_agent_sync_duration_seconds_sum":
			if err != nil {
				return st, fmt.Errorf("%s: %w", name, err)
			}
			st.sum, seen = time.Duration(v*float64(time.Second)), seen+1
		}
	}
	if seen != 2 {
		return st, errors.New("no groundcloud_agent_sync_duration_seconds in the agent's metrics")
	}
	return st, nil
}

func TestParseSyncStats(t *testing.T) {
	body := `# HELP groundcloud_agent_sync_duration_seconds [ALPHA] Time to program the data plane once (all families).
# TYPE groundcloud_agent_sync_duration_seconds histogram
groundcloud_agent_sync_duration_seconds_bucket{le="0.001"} 0
groundcloud_agent_sync_duration_seconds_bucket{le="+Inf"} 412
groundcloud_agent_sync_duration_seconds_sum 61.8
groundcloud_agent_sync_duration_seconds_count 412
groundcloud_agent_sync_failures_total 0
`
	st, err := parseSyncStats(body)
	if err != nil {
		t.Fatal(err)
	}
	if st.count != 412 || st.sum != 61800*time.Millisecond || st.mean() != 150*time.Millisecond {
		t.Errorf("parsed %+v (mean %s), want 412 syncs, 61.8 s, mean 150ms", st, st.mean())
	}
	if _, err := parseSyncStats("groundcloud_agent_sync_failures_total 0\n"); err == nil {
		t.Error("metrics without the histogram parsed without an error")
	}
}

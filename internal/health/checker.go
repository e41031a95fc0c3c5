package health

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"syscall"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// granularity divides the interval into the scheduler's smallest sleep, so
// that targets whose probes are due close together are dispatched in one
// pass instead of one wake-up each.
const granularity = 20

// Checker probes a changing set of targets and tracks their health. Its
// methods are safe for concurrent use.
type Checker struct {
	opts     Options
	onChange func()
	prober   Prober
	clock    clock.Clock
	jitter   func(max time.Duration) time.Duration

	mu      sync.RWMutex
	targets map[Target]*entry
	counts  map[State]int
	// probed is closed, and replaced, whenever a target gets its first
	// result (WaitProbed).
	probed chan struct{}
	// waitingUntil is when the scheduler wakes by itself; zero while it
	// waits for a signal only.
	waitingUntil time.Time

	wake    chan struct{} // to the scheduler; capacity 1
	changed chan struct{} // to the notifier; capacity 1
}

type entry struct {
	status   status
	next     time.Time // next probe; zero until the scheduler first sees the entry
	first    time.Time // when its first probe was sent
	inFlight bool
}

// notListeningRetries: a new target whose port refuses the connection is
// probed again this many times per interval (see record).
const notListeningRetries = 8

type job struct {
	target Target
	entry  *entry
}

// NewChecker returns a checker with no targets; it starts nothing. opts
// should have passed Validate; zero fields take their defaults. onChange
// (may be nil) is called after one or more targets changed state: from one
// goroutine of Run, never concurrently, never under the Checker's lock, and
// coalesced - one call may stand for several changes. Healthy already
// reports the new states when it runs.
func NewChecker(opts Options, onChange func()) *Checker {
	return newChecker(opts, onChange, NewHTTPProber(), clock.RealClock{}, randomJitter)
}

func newChecker(opts Options, onChange func(), prober Prober, clk clock.Clock, jitter func(time.Duration) time.Duration) *Checker {
	return &Checker{
		opts:     opts.withDefaults(),
		onChange: onChange,
		prober:   prober,
		clock:    clk,
		jitter:   jitter,
		targets:  map[Target]*entry{},
		counts:   map[State]int{},
		probed:   make(chan struct{}),
		wake:     make(chan struct{}, 1),
		changed:  make(chan struct{}, 1),
	}
}

// SetTargets makes ts the set of probed targets; duplicates count once. A new
// target starts Unknown and is probed at once (as soon as a worker is
// free); its first result decides its state, except a refused connection
// within one interval of the first probe: the target stays Unknown and is
// probed again an eighth of an interval later. A removed target stops being
// probed and its state is forgotten, without a call to onChange. Before
// Run, it only records.
func (c *Checker) SetTargets(ts []Target) {
	want := make(map[Target]struct{}, len(ts))
	for _, t := range ts {
		want[t] = struct{}{}
	}
	added := false
	c.mu.Lock()
	for t := range want {
		if _, ok := c.targets[t]; !ok {
			e := &entry{status: newStatus(c.opts.FailureThreshold, c.opts.SuccessThreshold)}
			c.targets[t] = e
			c.counts[e.status.State()]++
			added = true
		}
	}
	for t, e := range c.targets {
		if _, ok := want[t]; !ok {
			delete(c.targets, t)
			c.counts[e.status.State()]--
			if e.status.State() == Unknown {
				c.releaseWaiters()
			}
		}
	}
	recordTargets(c.counts)
	c.mu.Unlock()
	if added {
		signal(c.wake)
	}
}

// State reports what the Checker knows of t: Unknown until its first probe
// (and for targets not given to SetTargets).
func (c *Checker) State(t Target) State {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if e, ok := c.targets[t]; ok {
		return e.status.State()
	}
	return Unknown
}

// releaseWaiters wakes WaitProbed to count the unknown targets again. Call
// it with mu held.
func (c *Checker) releaseWaiters() {
	close(c.probed)
	c.probed = make(chan struct{})
}

// WaitProbed waits until no target is Unknown, for at most one interval,
// and reports whether none is. The first probes of new targets run at once
// and in parallel, each bounded by the timeout, so they are all back well
// within the interval unless more of them time out than there are workers
// (Concurrency × Interval/Timeout of them); those stay Unknown. It needs
// Run.
func (c *Checker) WaitProbed(ctx context.Context) bool {
	timer := c.clock.NewTimer(c.opts.Interval)
	defer timer.Stop()
	for {
		c.mu.RLock()
		unknown, probed := c.counts[Unknown], c.probed
		c.mu.RUnlock()
		if unknown == 0 {
			return true
		}
		select {
		case <-probed:
		case <-timer.C():
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// Run probes the targets until ctx ends: each once per interval, at most
// Concurrency at a time, each bounded by Timeout. Call it once.
func (c *Checker) Run(ctx context.Context) {
	jobs := make(chan job)
	var wg sync.WaitGroup
	for range c.opts.Concurrency {
		wg.Go(func() { c.work(ctx, jobs) })
	}
	wg.Go(func() { c.notify(ctx) })
	c.schedule(ctx, jobs)
	wg.Wait()
}

// schedule hands due targets to the workers; sending blocks while all
// workers are busy, which is what bounds the probes in flight.
func (c *Checker) schedule(ctx context.Context, jobs chan<- job) {
	for {
		due, wait := c.due()
		for _, j := range due {
			select {
			case jobs <- j:
			case <-ctx.Done():
				return
			}
		}
		if len(due) > 0 {
			continue // time passed while dispatching
		}
		if !c.sleep(ctx, wait) {
			return
		}
	}
}

// due marks the targets whose probe is due as in flight and returns them,
// with how long to sleep until the next one is due (negative: until a signal).
func (c *Checker) due() ([]job, time.Duration) {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	var jobs []job
	wait := time.Duration(-1)
	for t, e := range c.targets {
		if e.inFlight {
			continue
		}
		if d := e.next.Sub(now); !e.next.IsZero() && d > 0 {
			if wait < 0 || d < wait {
				wait = d
			}
			continue
		}
		e.inFlight = true
		if e.next.IsZero() {
			// The first probe runs at once; the second comes a jittered
			// interval later (one on average), so that targets added
			// together are not probed in step ever after.
			e.first = now
			e.next = now.Add(c.opts.Interval/2 + c.jitter(c.opts.Interval))
		} else {
			e.next = now.Add(c.opts.Interval)
		}
		jobs = append(jobs, job{target: t, entry: e})
	}
	c.waitingUntil = time.Time{}
	if wait >= 0 {
		wait = max(wait, c.opts.Interval/granularity)
		c.waitingUntil = now.Add(wait)
	}
	return jobs, wait
}

func (c *Checker) sleep(ctx context.Context, wait time.Duration) bool {
	var timeout <-chan time.Time
	if wait >= 0 {
		t := c.clock.NewTimer(wait)
		defer t.Stop()
		timeout = t.C()
	}
	select {
	case <-ctx.Done():
		return false
	case <-c.wake:
	case <-timeout:
	}
	return true
}

func (c *Checker) work(ctx context.Context, jobs <-chan job) {
	for {
		select {
		case <-ctx.Done():
			return
		case j := <-jobs:
			c.probe(ctx, j)
		}
	}
}

func (c *Checker) probe(ctx context.Context, j job) {
	c.mu.RLock()
	current := c.targets[j.target] == j.entry
	c.mu.RUnlock()
	if !current {
		return // removed while queued
	}
	probeCtx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	err := c.prober.Probe(probeCtx, j.target)
	cancel()
	if ctx.Err() != nil {
		return // shutting down: the result says nothing about the node
	}
	probes.WithLabelValues(resultOf(err)).Inc()
	c.record(ctx, j, err)
}

// record feeds one result into the target's status.
func (c *Checker) record(ctx context.Context, j job, err error) {
	c.mu.Lock()
	if c.targets[j.target] != j.entry {
		c.mu.Unlock()
		return // removed or replaced while probing
	}
	e := j.entry
	e.inFlight = false
	old := e.status.State()
	// Nothing listens on the port yet. For a healthCheckNodePort just
	// allocated (a Service created or switched to Local) that is
	// kube-proxy not having synced the Service, which says nothing of the
	// node's Pods: the target stays Unknown and is probed again soon, for
	// one interval; then a refusal counts.
	now := c.clock.Now()
	retry := old == Unknown && notListening(err) && now.Sub(e.first) < c.opts.Interval
	changed, state := false, old
	if retry {
		e.next = now.Add(c.opts.Interval / notListeningRetries)
	} else {
		changed = e.status.Observe(err == nil)
		state = e.status.State()
		if changed {
			c.counts[old]--
			c.counts[state]++
			recordTargets(c.counts)
		}
		if old == Unknown {
			c.releaseWaiters()
		}
	}
	// The scheduler skipped this target while it was in flight; wake it
	// unless it wakes by itself in time.
	wake := c.waitingUntil.IsZero() || e.next.Before(c.waitingUntil)
	c.mu.Unlock()

	if wake {
		signal(c.wake)
	}
	if retry {
		klog.FromContext(ctx).V(4).Info("Health check target not listening yet", "target", j.target.String(), "err", err)
		return
	}
	logger := klog.FromContext(ctx)
	switch {
	case old == Unknown:
		logger.V(2).Info("Health check target probed", "target", j.target.String(), "state", state.String(), "err", err)
		signal(c.changed)
	case changed && state == Healthy:
		logger.Info("Health check target is healthy again", "target", j.target.String())
		signal(c.changed)
	case changed:
		logger.Info("Health check target is unhealthy", "target", j.target.String(), "err", err)
		signal(c.changed)
	case err != nil:
		logger.V(4).Info("Health check failed", "target", j.target.String(), "state", state.String(), "err", err)
	}
}

func (c *Checker) notify(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.changed:
			if c.onChange != nil {
				c.onChange()
			}
		}
	}
}

// notListening reports whether a probe failed because the target's port
// refused the connection.
func notListening(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// signal wakes the receiver of a capacity-1 channel without blocking.
func signal(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func randomJitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return rand.N(d)
}

package async

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Runner schedules syncs for a caller that has no scheduling of its own, as
// kube-proxy's BoundedFrequencyRunner does: Request asks for a sync, Run
// performs them — at start, then at most once per interval however many
// requests arrive (they coalesce), at least once per maxInterval (0: never
// unless requested), and again one interval after a failed one.
//
// The interval is minInterval, or the duration of the last sync plus
// restFactor times the CPU time it used when that is longer: a sync that
// kept a core busy for c is followed by at least restFactor×c of rest, so
// that with thousands of services, while changes keep coming, syncing
// takes at most a third of a core and leaves the rest to the host (and,
// in a test bed, to the apiserver) instead of running back to back. The
// CPU time is the process's and its children's (nft) while the sync ran,
// at most its wall time: on a busy machine a sync waits for a core most of
// its wall time, and resting twice that wait would leave a core's third
// unused while changes wait (without a CPU clock, the wall time counts).
//
// Stuck says whether the loop does the work it is given (see there).
type Runner struct {
	sync        func(ctx context.Context) error
	minInterval time.Duration
	maxInterval time.Duration
	stuckAfter  time.Duration
	clock       clock.WithTicker
	cpu         func() time.Duration // CPU time used so far (nil: none)
	requests    chan struct{}

	mu       sync.Mutex
	running  bool          // Run has started
	started  time.Time     // of the sync in progress; zero between syncs
	ended    time.Time     // of the last sync, or when Run started
	waiting  time.Time     // oldest request no sync has started after; zero if none
	lastTook time.Duration // duration of the last sync
	interval time.Duration // least time from the last sync's start to the next one's
	begun    uint64        // syncs started so far
	finished uint64        // syncs ended so far
	ended1   chan struct{} // closed when the next sync ends (RequestAndWait)
}

// restFactor: rest after a sync, in multiples of the CPU time it used.
const restFactor = 2

// stuckFactor: a sync that takes this many times as long as the one before
// it (and longer than stuckAfter) is stuck.
const stuckFactor = 10

// NewRunner returns a Runner calling sync; it does not start it. Its loop
// counts as stuck (see Stuck) when work it was given is twice maxInterval
// overdue, as kube-proxy's health check allows twice its sync period (a
// minute without maxInterval).
func NewRunner(sync func(ctx context.Context) error, minInterval, maxInterval time.Duration) *Runner {
	stuckAfter := 2 * maxInterval
	if maxInterval <= 0 {
		stuckAfter = time.Minute
	}
	return newRunner(sync, minInterval, maxInterval, stuckAfter, clock.RealClock{}, processCPU)
}

func newRunner(sync func(ctx context.Context) error, minInterval, maxInterval, stuckAfter time.Duration, c clock.WithTicker, cpu func() time.Duration) *Runner {
	return &Runner{sync: sync, minInterval: minInterval, maxInterval: maxInterval, stuckAfter: stuckAfter, clock: c, cpu: cpu,
		requests: make(chan struct{}, 1), interval: minInterval, ended1: make(chan struct{})}
}

// processCPU is the CPU time, user and system, of this process and of its
// children that have ended (nft runs as one); -1 when it cannot be read.
func processCPU() time.Duration {
	var total time.Duration
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if syscall.Getrusage(who, &ru) != nil {
			return -1
		}
		total += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return total
}

// Request asks for a sync; it never blocks.
func (r *Runner) Request() {
	r.mu.Lock()
	if r.waiting.IsZero() {
		r.waiting = r.clock.Now()
	}
	r.mu.Unlock()
	select {
	case r.requests <- struct{}{}:
	default:
	}
}

// RequestAndWait asks for a sync and returns when a sync that started after
// the call has ended (whether it failed or not), or with ctx's error when
// ctx is done first. A sync in progress at the call does not count: it may
// have read what the caller changed before the change.
func (r *Runner) RequestAndWait(ctx context.Context) error {
	r.mu.Lock()
	want := r.begun + 1
	r.mu.Unlock()
	r.Request()
	for {
		r.mu.Lock()
		done, ended := r.finished >= want, r.ended1
		r.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ended:
		}
	}
}

// Stuck returns an error when the loop has not done work it was given in
// time: a sync has run for longer than stuckAfter and stuckFactor times
// the previous one; or a sync requested more than the rate limit's
// interval plus stuckAfter ago has not started; or, with a maxInterval, no
// sync has ended for maxInterval plus stuckAfter. Before Run it returns
// nil: waiting to start is not being stuck.
func (r *Runner) Stuck() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.running {
		return nil
	}
	now := r.clock.Now()
	interval := r.interval
	switch {
	case !r.started.IsZero() && now.Sub(r.started) > max(r.stuckAfter, stuckFactor*r.lastTook):
		return fmt.Errorf("a data plane sync has been running for %s", now.Sub(r.started).Round(time.Second))
	case !r.waiting.IsZero() && now.Sub(r.waiting) > interval+r.stuckAfter:
		return fmt.Errorf("a data plane sync requested %s ago has not started", now.Sub(r.waiting).Round(time.Second))
	case r.maxInterval > 0 && r.started.IsZero() && now.Sub(r.ended) > r.maxInterval+interval+r.stuckAfter:
		return fmt.Errorf("no data plane sync for %s", now.Sub(r.ended).Round(time.Second))
	}
	return nil
}

// intervalAfter is the least time between the starts of a sync that took
// took and used cpu of CPU time, and of the next one.
func (r *Runner) intervalAfter(took, cpu time.Duration) time.Duration {
	return max(r.minInterval, took+restFactor*min(cpu, took))
}

// Run syncs until ctx is done.
func (r *Runner) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	r.mu.Lock()
	r.running, r.ended = true, r.clock.Now()
	r.mu.Unlock()
	pending, last, interval := true, time.Time{}, r.minInterval
	for {
		if pending && (last.IsZero() || r.clock.Since(last) >= interval) {
			last, pending = r.clock.Now(), false
			var err error
			interval, err = r.syncOnce(ctx, last)
			if err != nil {
				logger.Error(err, "Data plane sync failed; retrying", "after", interval)
				pending = true
			}
			continue
		}
		var timer clock.Timer
		var fire <-chan time.Time
		switch {
		case pending:
			timer = r.clock.NewTimer(interval - r.clock.Since(last))
		case r.maxInterval > 0:
			timer = r.clock.NewTimer(r.maxInterval - r.clock.Since(last))
		}
		if timer != nil {
			fire = timer.C()
		}
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return
		case <-r.requests:
			pending = true
		case <-fire:
			pending = true
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// syncOnce runs one sync that starts at start, records it for Stuck, and
// returns the interval to the next one.
func (r *Runner) syncOnce(ctx context.Context, start time.Time) (time.Duration, error) {
	r.mu.Lock()
	r.started, r.waiting = start, time.Time{}
	r.begun++
	r.mu.Unlock()
	cpu0 := time.Duration(-1)
	if r.cpu != nil {
		cpu0 = r.cpu()
	}
	err := r.sync(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ended = r.clock.Now()
	r.started, r.lastTook = time.Time{}, r.ended.Sub(start)
	r.finished++
	close(r.ended1)
	r.ended1 = make(chan struct{})
	used := r.lastTook // without a CPU clock, or when it cannot be read
	if cpu0 >= 0 {
		if cpu1 := r.cpu(); cpu1 >= 0 {
			used = cpu1 - cpu0
		}
	}
	r.interval = r.intervalAfter(r.lastTook, used)
	return r.interval, err
}

package dataplane

import (
	"context"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Runner schedules syncs for a caller that has no scheduling of its own, as
// kube-proxy's BoundedFrequencyRunner does: Request asks for a sync, Run
// performs them — at start, then at most once per minInterval however many
// requests arrive (they coalesce), at least once per maxInterval (0: never
// unless requested), and again minInterval after a failed one.
type Runner struct {
	sync        func(ctx context.Context) error
	minInterval time.Duration
	maxInterval time.Duration
	clock       clock.WithTicker
	requests    chan struct{}
}

// NewRunner returns a Runner calling sync; it does not start it.
func NewRunner(sync func(ctx context.Context) error, minInterval, maxInterval time.Duration) *Runner {
	return newRunner(sync, minInterval, maxInterval, clock.RealClock{})
}

func newRunner(sync func(ctx context.Context) error, minInterval, maxInterval time.Duration, c clock.WithTicker) *Runner {
	return &Runner{sync: sync, minInterval: minInterval, maxInterval: maxInterval, clock: c, requests: make(chan struct{}, 1)}
}

// Request asks for a sync; it never blocks.
func (r *Runner) Request() {
	select {
	case r.requests <- struct{}{}:
	default:
	}
}

// Run syncs until ctx is done.
func (r *Runner) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	pending, last := true, time.Time{}
	for {
		if pending && (last.IsZero() || r.clock.Since(last) >= r.minInterval) {
			last, pending = r.clock.Now(), false
			if err := r.sync(ctx); err != nil {
				logger.Error(err, "Data plane sync failed; retrying", "after", r.minInterval)
				pending = true
			}
			continue
		}
		var timer clock.Timer
		var fire <-chan time.Time
		switch {
		case pending:
			timer = r.clock.NewTimer(r.minInterval - r.clock.Since(last))
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

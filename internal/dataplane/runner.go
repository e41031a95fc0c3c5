package dataplane

import (
	"context"
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
// The interval is minInterval, or restFactor+1 times the duration of the
// last sync when that is longer: a sync that takes d is followed by at
// least restFactor×d of rest, so that with thousands of services, while
// changes keep coming, syncing takes at most a third of a core and leaves
// the rest to the host (and, in a test bed, to the apiserver) instead of
// running back to back.
type Runner struct {
	sync        func(ctx context.Context) error
	minInterval time.Duration
	maxInterval time.Duration
	clock       clock.WithTicker
	requests    chan struct{}
}

// restFactor: rest after a sync, in multiples of its duration.
const restFactor = 2

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
	pending, last, interval := true, time.Time{}, r.minInterval
	for {
		if pending && (last.IsZero() || r.clock.Since(last) >= interval) {
			last, pending = r.clock.Now(), false
			err := r.sync(ctx)
			interval = max(r.minInterval, (restFactor+1)*r.clock.Since(last))
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

package redfish

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Follower makes a test machine follow its system's power in the
// emulator, as a real machine follows its BMC: each change of PowerState
// between "On" and "Off" is handed to apply once.
type Follower struct {
	mu      sync.Mutex
	applied string
	changed time.Time
	err     error
	cancel  context.CancelFunc
	done    chan struct{}
}

// Follow polls system's PowerState every 250 ms and calls apply(false)
// when it turns Off and apply(true) when it turns On; the system is taken
// to be as it was at start. Stop ends it.
func (e *Emulator) Follow(system string, apply func(on bool) error) *Follower {
	ctx, cancel := context.WithCancel(context.Background())
	f := &Follower{applied: "On", cancel: cancel, done: make(chan struct{})}
	for _, s := range e.opts.Systems {
		if s.ID == system && !s.On {
			f.applied = "Off"
		}
	}
	go func() {
		defer close(f.done)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			st, err := e.PowerState(ctx, system)
			if err != nil || (st != "On" && st != "Off") {
				continue
			}
			f.mu.Lock()
			if st != f.applied {
				if err := apply(st == "On"); err != nil && f.err == nil {
					f.err = err
				}
				f.applied, f.changed = st, time.Now()
			}
			f.mu.Unlock()
		}
	}()
	return f
}

// Applied is the power state last applied ("On" or "Off"), when it was
// (zero before the first change), and the first error apply returned.
func (f *Follower) Applied() (string, time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applied, f.changed, f.err
}

// WaitApplied waits until power state want ("On" or "Off") is applied,
// apply failed, or ctx is done; it returns when want was applied. The
// emulator turns a system off or on some seconds after the request.
func (f *Follower) WaitApplied(ctx context.Context, want string) (time.Time, error) {
	for {
		st, when, err := f.Applied()
		switch {
		case err != nil:
			return when, fmt.Errorf("apply power %s: %w", st, err)
		case st == want:
			return when, nil
		}
		select {
		case <-ctx.Done():
			return when, fmt.Errorf("power %s not applied (still %s): %w", want, st, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop ends the polling; it applies nothing more.
func (f *Follower) Stop() {
	f.cancel()
	<-f.done
}

package async

import (
	"context"
	"errors"
	"os/exec"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
)

type runnerHarness struct {
	t     *testing.T
	clock *testingclock.FakeClock
	calls chan time.Time
	fail  chan error
	took  chan time.Duration // how long the next sync takes (fake time)
	used  chan time.Duration // CPU time the next sync uses (default: all it took)
	cpu   atomic.Int64       // the fake CPU clock, in nanoseconds
}

// startRunner starts a runner on a fake clock. prefill (may be nil) queues
// what the first syncs do (h.took, h.fail) before it starts: the first
// sync runs at once and would otherwise miss what the test queues after.
func startRunner(t *testing.T, minInterval, maxInterval time.Duration, prefill func(h *runnerHarness)) (*Runner, *runnerHarness) {
	h := &runnerHarness{t: t, clock: testingclock.NewFakeClock(time.Unix(1000, 0)), calls: make(chan time.Time, 10), fail: make(chan error, 10),
		took: make(chan time.Duration, 10), used: make(chan time.Duration, 10)}
	if prefill != nil {
		prefill(h)
	}
	r := newRunner(func(context.Context) error {
		h.calls <- h.clock.Now()
		select {
		case d := <-h.took:
			h.clock.Step(d)
			select {
			case u := <-h.used:
				d = u
			default:
			}
			h.cpu.Add(int64(d))
		default:
		}
		select {
		case err := <-h.fail:
			return err
		default:
			return nil
		}
	}, minInterval, maxInterval, time.Minute, h.clock, func() time.Duration { return time.Duration(h.cpu.Load()) })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("Run did not return after the context ended")
		}
	})
	return r, h
}

// expectSync waits for a sync at the fake time want.
func (h *runnerHarness) expectSync(want time.Time) {
	h.t.Helper()
	select {
	case at := <-h.calls:
		if !at.Equal(want) {
			h.t.Fatalf("sync at %v, want %v", at.Sub(time.Unix(1000, 0)), want.Sub(time.Unix(1000, 0)))
		}
	case <-time.After(5 * time.Second):
		h.t.Fatalf("no sync at %v", want.Sub(time.Unix(1000, 0)))
	}
}

func (h *runnerHarness) expectNoSync() {
	h.t.Helper()
	select {
	case at := <-h.calls:
		h.t.Fatalf("unexpected sync at %v", at.Sub(time.Unix(1000, 0)))
	case <-time.After(50 * time.Millisecond):
	}
}

// step advances the fake clock once the runner waits on it.
func (h *runnerHarness) step(d time.Duration) {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !h.clock.HasWaiters() {
		if time.Now().After(deadline) {
			h.t.Fatal("the runner never waits on the clock")
		}
		time.Sleep(time.Millisecond)
	}
	h.clock.Step(d)
}

func TestRunnerCoalescesRequestsWithinMinInterval(t *testing.T) {
	r, h := startRunner(t, time.Second, 0, nil)
	start := h.clock.Now()
	h.expectSync(start) // at start
	r.Request()
	r.Request()
	r.Request()
	h.expectNoSync()
	h.step(time.Second)
	h.expectSync(start.Add(time.Second))
	h.expectNoSync()
}

func TestRunnerSyncsAtMaxInterval(t *testing.T) {
	_, h := startRunner(t, time.Second, time.Minute, nil)
	start := h.clock.Now()
	h.expectSync(start)
	h.step(time.Minute)
	h.expectSync(start.Add(time.Minute))
}

func TestRunnerRetriesAfterFailure(t *testing.T) {
	_, h := startRunner(t, time.Second, 0, func(h *runnerHarness) { h.fail <- errors.New("injected failure") })
	start := h.clock.Now()
	h.expectSync(start)
	h.step(time.Second)
	h.expectSync(start.Add(time.Second))
	h.expectNoSync()
}

func TestRunnerRestsTwiceAsLongAsASyncTook(t *testing.T) {
	r, h := startRunner(t, 100*time.Millisecond, 0, func(h *runnerHarness) { h.took <- 300 * time.Millisecond })
	t0 := time.Unix(1000, 0)
	h.expectSync(t0) // takes until t0+300ms: the next no sooner than t0+900ms
	r.Request()
	h.step(500 * time.Millisecond) // t0+800ms
	h.expectNoSync()
	h.step(100 * time.Millisecond) // t0+900ms
	h.expectSync(t0.Add(900 * time.Millisecond))
	// A quick sync brings the interval back to minInterval.
	r.Request()
	h.step(100 * time.Millisecond)
	h.expectSync(t0.Add(time.Second))
}

// A sync that waited for a core most of its wall time rests twice the CPU
// time it used, not twice its wall time.
func TestRunnerRestsTwiceTheCPUASyncUsed(t *testing.T) {
	r, h := startRunner(t, 100*time.Millisecond, 0, func(h *runnerHarness) {
		h.took <- 300 * time.Millisecond
		h.used <- 50 * time.Millisecond
	})
	t0 := time.Unix(1000, 0)
	h.expectSync(t0) // until t0+300ms, 50ms of CPU: the next no sooner than t0+400ms
	r.Request()
	h.step(50 * time.Millisecond) // t0+350ms
	h.expectNoSync()
	h.step(50 * time.Millisecond) // t0+400ms
	h.expectSync(t0.Add(400 * time.Millisecond))
}

// A loop whose sync never returns is stuck once the sync has run for
// stuckAfter; a loop that keeps up, or has nothing to do, is not.
func TestRunnerStuck(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	release := make(chan struct{})
	entered := make(chan struct{}, 10)
	r := newRunner(func(ctx context.Context) error {
		entered <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}, time.Second, 30*time.Second, time.Minute, clk, nil)
	if err := r.Stuck(); err != nil {
		t.Errorf("Stuck before Run: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	<-entered // the first sync hangs
	clk.Step(59 * time.Second)
	r.Request()
	if err := r.Stuck(); err != nil {
		t.Errorf("Stuck 59 s into a sync: %v", err)
	}
	clk.Step(2 * time.Second)
	if err := r.Stuck(); err == nil {
		t.Error("Stuck = nil with a sync running for 61 s (stuckAfter 1 minute)")
	} else {
		t.Logf("Stuck: %v", err)
	}
	release <- struct{}{} // it returns; the request waits for the rest after 61 s of sync
	waitUntil(t, clk.HasWaiters)
	if err := r.Stuck(); err != nil {
		t.Errorf("Stuck after the sync returned: %v", err)
	}
	clk.Step(restFactor * 61 * time.Second)
	<-entered
	release <- struct{}{}

	// Nothing requested: idle, and syncing every maxInterval.
	for range 5 {
		waitUntil(t, clk.HasWaiters)
		clk.Step(30 * time.Second)
		<-entered
		release <- struct{}{}
		if err := r.Stuck(); err != nil {
			t.Errorf("Stuck while keeping up: %v", err)
		}
	}
}

// A loop that is not running (its goroutine gone) does not serve requests
// nor its maxInterval; both make it stuck once Run has started.
func TestRunnerStuckWithoutLoop(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	r := newRunner(func(context.Context) error { return nil }, time.Second, 30*time.Second, time.Minute, clk, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	waitUntil(t, clk.HasWaiters) // the first sync is done
	cancel()
	<-done
	clk.Step(time.Minute)
	if err := r.Stuck(); err != nil {
		t.Errorf("Stuck a minute after the last sync: %v", err)
	}
	r.Request()
	clk.Step(62 * time.Second)
	if err := r.Stuck(); err == nil {
		t.Error("Stuck = nil with a request unserved for 61 s")
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// A CPU clock that cannot be read leaves the wall time to count.
func TestRunnerRestsTheWallTimeWithoutACPUClock(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	r := newRunner(func(context.Context) error { clk.Step(300 * time.Millisecond); return nil },
		100*time.Millisecond, 0, time.Minute, clk, func() time.Duration { return -1 })
	if interval, err := r.syncOnce(context.Background(), clk.Now()); err != nil || interval != 900*time.Millisecond {
		t.Errorf("interval after a 300ms sync with an unreadable CPU clock: %s (%v), want 900ms", interval, err)
	}
}

// processCPU counts this process's CPU time and that of its children once
// they have ended, as nft's are.
func TestProcessCPU(t *testing.T) {
	before := processCPU()
	for deadline := time.Now().Add(50 * time.Millisecond); time.Now().Before(deadline); {
	}
	self := processCPU()
	if self <= before {
		t.Fatalf("CPU time %s after 50ms of spinning, was %s", self, before)
	}
	// A child that spins for a while; it ends before processCPU reads.
	children0 := childrenCPU(t)
	if out, err := exec.Command("sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done").CombinedOutput(); err != nil {
		t.Fatalf("child: %v: %s", err, out)
	}
	child := childrenCPU(t) - children0
	if child == 0 {
		t.Fatal("the child's CPU time is not counted")
	}
	if after := processCPU(); after < self+child {
		t.Errorf("CPU time %s after a child that used %s, want at least %s", after, child, self+child)
	}
}

func childrenCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// RequestAndWait returns once a sync that started after the call has
// ended: not when the sync in progress at the call ends (it may have read
// the state before the caller changed it), and with ctx's error when ctx
// ends first.
func TestRunnerRequestAndWait(t *testing.T) {
	started, release := make(chan struct{}, 10), make(chan struct{})
	var n atomic.Int32
	r := newRunner(func(ctx context.Context) error {
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		if n.Add(1) == 2 {
			return errors.New("a failed sync counts as ended")
		}
		return nil
	}, time.Millisecond, 0, time.Minute, clock.RealClock{}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Run(ctx)
	waitStarted := func(what string) {
		t.Helper()
		select {
		case <-started:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s did not start", what)
		}
	}
	waitStarted("the first sync")
	returned := make(chan error, 1)
	go func() { returned <- r.RequestAndWait(context.Background()) }()
	for asked := false; !asked; { // the call has read the count and asked
		time.Sleep(time.Millisecond)
		r.mu.Lock()
		asked = !r.waiting.IsZero()
		r.mu.Unlock()
	}
	release <- struct{}{} // the first sync ends
	waitStarted("the sync asked for")
	select {
	case err := <-returned:
		t.Fatalf("RequestAndWait returned (%v) when the sync in progress at the call ended", err)
	case <-time.After(100 * time.Millisecond):
	}
	release <- struct{}{}
	select {
	case err := <-returned:
		if err != nil {
			t.Fatalf("RequestAndWait: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("RequestAndWait did not return after the sync asked for ended")
	}

	wctx, wcancel := context.WithCancel(context.Background())
	go func() { returned <- r.RequestAndWait(wctx) }()
	waitStarted("the third sync")
	wcancel()
	select {
	case err := <-returned:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("RequestAndWait with its context ended: %v, want %v", err, context.Canceled)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("RequestAndWait did not return when its context ended")
	}
	close(release)
}

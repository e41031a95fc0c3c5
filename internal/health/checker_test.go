package health

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	testingclock "k8s.io/utils/clock/testing"
)

var errProbe = errors.New("probe failed")

// scriptedProber hands every probe to the test, which answers it.
type scriptedProber struct{ calls chan probeCall }

type probeCall struct {
	target Target
	reply  chan<- error
}

func (p *scriptedProber) Probe(ctx context.Context, t Target) error {
	reply := make(chan error, 1)
	select {
	case p.calls <- probeCall{target: t, reply: reply}:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

type checkerEnv struct {
	t       *testing.T
	checker *Checker
	prober  *scriptedProber
	clock   *testingclock.FakeClock
	changes chan struct{}
}

// newCheckerEnv builds a checker on a fake clock with a scripted prober.
// The probes' timeout runs on the real clock; it is long enough never to fire.
func newCheckerEnv(t *testing.T, opts Options, jitter time.Duration) *checkerEnv {
	t.Helper()
	opts.Timeout = time.Minute
	opts.Interval = 2 * time.Second
	env := &checkerEnv{
		t:       t,
		prober:  &scriptedProber{calls: make(chan probeCall)},
		clock:   testingclock.NewFakeClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)),
		changes: make(chan struct{}, 100),
	}
	env.checker = newChecker(opts, func() { env.changes <- struct{}{} }, env.prober, env.clock,
		func(time.Duration) time.Duration { return jitter })
	return env
}

func (env *checkerEnv) run() {
	ctx, cancel := context.WithCancel(env.t.Context())
	done := make(chan struct{})
	go func() {
		env.checker.Run(ctx)
		close(done)
	}()
	env.t.Cleanup(func() {
		cancel()
		<-done
	})
}

func (env *checkerEnv) expectProbe() probeCall {
	env.t.Helper()
	select {
	case c := <-env.prober.calls:
		return c
	case <-time.After(5 * time.Second):
		env.t.Fatal("no probe")
		return probeCall{}
	}
}

func (env *checkerEnv) expectNoProbe() {
	env.t.Helper()
	select {
	case c := <-env.prober.calls:
		env.t.Fatalf("unexpected probe of %s", c.target)
	case <-time.After(50 * time.Millisecond):
	}
}

func (env *checkerEnv) expectChange() {
	env.t.Helper()
	select {
	case <-env.changes:
	case <-time.After(5 * time.Second):
		env.t.Fatal("onChange not called")
	}
}

// step advances the fake clock once the scheduler sleeps on it.
func (env *checkerEnv) step(d time.Duration) {
	env.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !env.clock.HasWaiters() {
		if time.Now().After(deadline) {
			env.t.Fatal("scheduler never slept")
		}
		time.Sleep(time.Millisecond)
	}
	env.clock.Step(d)
}

func target(addr string, port int32) Target {
	return Target{Addr: netip.MustParseAddr(addr), Port: port, Path: "/healthz"}
}

func TestCheckerFollowsThresholds(t *testing.T) {
	env := newCheckerEnv(t, Options{FailureThreshold: 2, SuccessThreshold: 1}, 0)
	node := target("192.0.2.10", 10256)
	env.checker.SetTargets([]Target{node})
	env.run()
	interval := env.checker.opts.Interval

	steps := []struct {
		result     error
		want       State
		wantChange bool
	}{
		{result: nil, want: Healthy, wantChange: true}, // the first result decides
		{result: errProbe, want: Healthy},
		{result: errProbe, want: Unhealthy, wantChange: true},
		{result: errProbe, want: Unhealthy},
		{result: nil, want: Healthy, wantChange: true},
		{result: nil, want: Healthy},
	}
	for i, s := range steps {
		if i > 0 {
			env.step(interval)
		}
		call := env.expectProbe()
		if call.target != node {
			t.Fatalf("step %d: probed %s, want %s", i, call.target, node)
		}
		call.reply <- s.result
		if s.wantChange {
			env.expectChange()
		}
		waitFor(t, func() bool { return env.checker.State(node) == s.want })
	}
	if len(env.changes) != 0 {
		t.Errorf("%d extra onChange calls", len(env.changes))
	}
}

func TestCheckerProbesEachTargetOnce(t *testing.T) {
	env := newCheckerEnv(t, Options{}, 0)
	a, b := target("192.0.2.10", 10256), target("192.0.2.11", 10256)
	env.checker.SetTargets([]Target{a, b, a, b, a})
	env.run()

	var got []string
	for range 2 {
		c := env.expectProbe()
		got = append(got, c.target.String())
		c.reply <- nil
	}
	env.expectNoProbe()
	slices.Sort(got)
	if diff := cmp.Diff([]string{a.String(), b.String()}, got); diff != "" {
		t.Errorf("first round probed (-want +got):\n%s", diff)
	}

	env.checker.SetTargets([]Target{a}) // b removed
	env.step(env.checker.opts.Interval)
	c := env.expectProbe()
	if c.target != a {
		t.Errorf("probed %s, want only %s", c.target, a)
	}
	c.reply <- nil
	env.expectNoProbe()
}

// A new target is probed at once, its second probe comes after half an
// interval and the jitter, and the others one interval apart.
func TestCheckerProbesNewTargetsAtOnceThenJitters(t *testing.T) {
	const jitter = 700 * time.Millisecond
	env := newCheckerEnv(t, Options{}, jitter)
	env.checker.SetTargets([]Target{target("192.0.2.10", 10256)})
	env.run()
	env.expectProbe().reply <- nil
	second := env.checker.opts.Interval/2 + jitter
	env.step(second - time.Millisecond)
	env.expectNoProbe()
	env.step(time.Millisecond)
	env.expectProbe().reply <- nil
	env.step(env.checker.opts.Interval - time.Millisecond)
	env.expectNoProbe()
	env.step(time.Millisecond)
	env.expectProbe().reply <- nil
}

func TestCheckerBoundsConcurrency(t *testing.T) {
	env := newCheckerEnv(t, Options{Concurrency: 3}, 0)
	var ts []Target
	for i := range 10 {
		ts = append(ts, target("192.0.2.10", int32(30000+i)))
	}
	env.checker.SetTargets(ts)
	env.run()

	var inFlight []probeCall
	for range 3 {
		inFlight = append(inFlight, env.expectProbe())
	}
	env.expectNoProbe()
	inFlight[0].reply <- nil
	inFlight = append(inFlight[1:], env.expectProbe())
	env.expectNoProbe()
	for _, c := range inFlight {
		c.reply <- nil
	}
	for range 10 - 4 {
		env.expectProbe().reply <- nil
	}
	env.expectNoProbe()
}

// A target is Unknown until its first probe, whose result decides at once:
// a node that fails it gets no new flows, without waiting for
// FailureThreshold failures.
func TestCheckerNewTargetsAreUnknownUntilTheFirstProbe(t *testing.T) {
	env := newCheckerEnv(t, Options{FailureThreshold: 2}, 0)
	up, down := target("192.0.2.10", 10256), target("192.0.2.11", 10256)
	if got := env.checker.State(up); got != Unknown {
		t.Errorf("a target never given: %v, want unknown", got)
	}
	env.checker.SetTargets([]Target{up, down})
	for _, tg := range []Target{up, down} {
		if got := env.checker.State(tg); got != Unknown {
			t.Errorf("%s before its first probe: %v, want unknown", tg, got)
		}
	}
	env.run()
	for range 2 {
		c := env.expectProbe() // at once: no clock step
		if c.target == down {
			c.reply <- errProbe
		} else {
			c.reply <- nil
		}
	}
	waitFor(t, func() bool { return env.checker.State(up) == Healthy && env.checker.State(down) == Unhealthy })
	env.expectChange()
}

// A new target whose port refuses the connection (kube-proxy has not
// opened a healthCheckNodePort just allocated) stays Unknown and is probed
// again an eighth of an interval later; after one interval a refusal
// counts. Any other failure decides at once.
func TestCheckerRetriesNewTargetsThatRefuse(t *testing.T) {
	env := newCheckerEnv(t, Options{}, 0)
	interval := env.checker.opts.Interval
	late, absent, failing := target("192.0.2.10", 30001), target("192.0.2.11", 30001), target("192.0.2.12", 30001)
	env.checker.SetTargets([]Target{late, absent, failing})
	start := env.clock.Now()
	env.run()
	refusedProbes := 0
	var probedAt []time.Duration
	answer := func(c probeCall) {
		switch c.target {
		case failing:
			c.reply <- errProbe
		case late:
			if env.clock.Since(start) < interval/4 {
				c.reply <- refused
				return
			}
			c.reply <- nil
		default:
			refusedProbes++
			probedAt = append(probedAt, env.clock.Since(start))
			c.reply <- refused
		}
	}
	for range 3 {
		answer(env.expectProbe())
	}
	env.idle(answer)
	if got := env.checker.State(failing); got != Unhealthy {
		t.Errorf("a target whose first probe failed otherwise: %v, want unhealthy", got)
	}
	for _, tg := range []Target{late, absent} {
		if got := env.checker.State(tg); got != Unknown {
			t.Errorf("%s refused its first probe: %v, want unknown", tg, got)
		}
	}
	for env.checker.State(absent) == Unknown {
		if env.clock.Since(start) > 2*interval {
			t.Fatalf("%s still unknown %s after its first probe", absent, env.clock.Since(start))
		}
		env.step(interval / notListeningRetries)
		env.idle(answer)
		if env.clock.Since(start) >= interval/4 && env.checker.State(late) != Healthy {
			t.Fatalf("%s answered at +%s: %v, want healthy", late, env.clock.Since(start), env.checker.State(late))
		}
	}
	if got, elapsed := env.checker.State(absent), env.clock.Since(start); got != Unhealthy || elapsed < interval {
		t.Errorf("%s refused every probe: %v after %s, want unhealthy once an interval has passed", absent, got, elapsed)
	}
	if refusedProbes < notListeningRetries {
		t.Errorf("%s probed %d times in its first interval, want %d: at %v", absent, refusedProbes, notListeningRetries, probedAt)
	}
}

// refused is the error of a probe whose connection is refused.
var refused = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}

// idle answers probes with answer until none is in flight and the
// scheduler sleeps on the clock with no wake-up pending (one pending means
// it is about to dispatch a probe the last result scheduled).
func (env *checkerEnv) idle(answer func(probeCall)) {
	env.t.Helper()
	waitFor(env.t, func() bool {
		select {
		case c := <-env.prober.calls:
			answer(c)
			return false
		default:
		}
		env.checker.mu.RLock()
		defer env.checker.mu.RUnlock()
		for _, e := range env.checker.targets {
			if e.inFlight {
				return false
			}
		}
		return env.clock.HasWaiters() && len(env.checker.wake) == 0
	})
}

func TestCheckerWaitProbed(t *testing.T) {
	env := newCheckerEnv(t, Options{}, 0)
	a, b := target("192.0.2.10", 10256), target("192.0.2.11", 10256)
	env.checker.SetTargets([]Target{a, b})
	env.run()
	waited := make(chan bool)
	go func() { waited <- env.checker.WaitProbed(t.Context()) }()
	first := env.expectProbe()
	second := env.expectProbe()
	first.reply <- nil
	select {
	case ok := <-waited:
		t.Fatalf("WaitProbed returned %v with a first probe in flight", ok)
	case <-time.After(50 * time.Millisecond):
	}
	second.reply <- errProbe
	select {
	case ok := <-waited:
		if !ok {
			t.Error("WaitProbed = false after every first probe came back")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitProbed still waiting after every first probe came back")
	}
	if !env.checker.WaitProbed(t.Context()) {
		t.Error("WaitProbed = false with every target probed")
	}

	// A probe that does not come back holds WaitProbed one interval at most.
	c := target("192.0.2.12", 10256)
	env.checker.SetTargets([]Target{a, b, c})
	go func() { waited <- env.checker.WaitProbed(t.Context()) }()
	hung := env.expectProbe()
	if hung.target != c {
		t.Fatalf("probed %s, want the new %s", hung.target, c)
	}
	time.Sleep(50 * time.Millisecond) // WaitProbed sets its timer
	env.clock.Step(env.checker.opts.Interval)
	select {
	case ok := <-waited:
		if ok {
			t.Error("WaitProbed = true with a target unknown")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitProbed still waiting one interval later")
	}
	hung.reply <- nil
	waitFor(t, func() bool { return env.checker.State(c) == Healthy })

	// Removing the last unknown target ends the wait.
	d := target("192.0.2.13", 10256)
	env.checker.SetTargets([]Target{a, b, c, d})
	go func() { waited <- env.checker.WaitProbed(t.Context()) }()
	hung = env.expectProbe()
	time.Sleep(50 * time.Millisecond) // WaitProbed waits
	env.checker.SetTargets([]Target{a, b, c})
	select {
	case ok := <-waited:
		if !ok {
			t.Error("WaitProbed = false once the unknown target was removed")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitProbed still waiting after the unknown target was removed")
	}
	hung.reply <- nil
}

func TestCheckerForgetsRemovedTargets(t *testing.T) {
	env := newCheckerEnv(t, Options{FailureThreshold: 1}, 0)
	node := target("192.0.2.10", 10256)
	env.checker.SetTargets([]Target{node})
	env.run()
	env.expectProbe().reply <- errProbe
	env.expectChange()
	env.checker.SetTargets(nil)
	if got := env.checker.State(node); got != Unknown {
		t.Errorf("removed target: %v, want unknown", got)
	}
	env.checker.SetTargets([]Target{node})
	if got := env.checker.State(node); got != Unknown {
		t.Errorf("re-added target: %v, want a fresh (unknown) start", got)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5s")
		}
		time.Sleep(time.Millisecond)
	}
}

// onChangeCounter counts onChange calls and checks they never overlap.
type onChangeCounter struct {
	mu      sync.Mutex
	calls   int
	running bool
	overlap bool
}

func (c *onChangeCounter) call() {
	c.mu.Lock()
	if c.running {
		c.overlap = true
	}
	c.running = true
	c.calls++
	c.mu.Unlock()
	time.Sleep(time.Millisecond)
	c.mu.Lock()
	c.running = false
	c.mu.Unlock()
}

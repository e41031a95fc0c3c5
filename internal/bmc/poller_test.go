package bmc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/component-base/metrics/testutil"

	"github.com/groundcloud/groundcloud/internal/config"
)

// fakeBMCs answers each BMC URL as told; a URL not told is unreachable.
type fakeBMCs struct {
	mu      sync.Mutex
	answers map[string]Answer
	errs    map[string]error
	calls   map[string]int
}

func newFakeBMCs() *fakeBMCs {
	return &fakeBMCs{answers: map[string]Answer{}, errs: map[string]error{}, calls: map[string]int{}}
}

func (f *fakeBMCs) set(url string, a Answer, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers[url], f.errs[url] = a, err
}

func (f *fakeBMCs) Query(_ context.Context, b *config.BMC) (Answer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[b.URL]++
	a, ok := f.answers[b.URL]
	if !ok {
		return Answer{}, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	}
	return a, f.errs[b.URL]
}

func machineWithBMC(name, url string) *config.Machine {
	return &config.Machine{Name: name, BMC: &config.BMC{URL: url, InsecureSkipVerify: true,
		Timeout: 50 * time.Millisecond, PollInterval: 50 * time.Millisecond}}
}

func cfgOf(ms ...*config.Machine) *config.Config {
	c := &config.Config{Machines: map[string]*config.Machine{}}
	for _, m := range ms {
		c.Machines[m.Name] = m
	}
	return c
}

// waitStatus waits until the machine's status satisfies ok.
func waitStatus(t *testing.T, p *Poller, machine string, ok func(Status, bool) bool) Status {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s, found := p.Status(machine)
		if ok(s, found) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("machine %s: status %+v (found %v) never became what the test waits for", machine, s, found)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestPollerFollowsAnswersAndConfig(t *testing.T) {
	RegisterMetrics()
	bmcs := newFakeBMCs()
	bmcs.set("https://a", Answer{PowerState: "On", Model: "R650"}, nil)
	bmcs.set("https://b", Answer{PowerState: "Off"}, nil)
	var cfg atomic.Pointer[config.Config]
	cfg.Store(cfgOf(machineWithBMC("a", "https://a"), machineWithBMC("b", "https://b"),
		machineWithBMC("gone-bmc", "https://nowhere"), &config.Machine{Name: "no-bmc"}))
	p := NewPoller(cfg.Load, bmcs)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	a := waitStatus(t, p, "a", func(s Status, ok bool) bool { return ok && s.Answer.PowerState == "On" })
	if a.Answer.Model != "R650" || a.PoweredOff(time.Now()) || a.MaxAge != FreshFor(50*time.Millisecond) || a.BMC.URL != "https://a" {
		t.Errorf("a: %+v", a)
	}
	waitStatus(t, p, "b", func(s Status, ok bool) bool { return ok && s.PoweredOff(time.Now()) })
	u := waitStatus(t, p, "gone-bmc", func(s Status, ok bool) bool { return ok && s.Err != nil })
	if u.Reason != ReasonUnreachable || u.PoweredOff(time.Now()) {
		t.Errorf("unreachable BMC: %+v", u)
	}
	if _, ok := p.Status("no-bmc"); ok {
		t.Error("a machine without a BMC has a status")
	}
	if v, _ := testutil.GetGaugeMetricValue(up.WithLabelValues("gone-bmc")); v != 0 {
		t.Errorf("groundcloud_bmc_up{machine=gone-bmc} = %v, want 0", v)
	}
	if v, _ := testutil.GetGaugeMetricValue(powerState.WithLabelValues("b", "Off")); v != 1 {
		t.Errorf(`groundcloud_bmc_power_state{machine="b",state="Off"} = %v, want 1`, v)
	}

	// b's BMC times out: its Off answer no longer counts.
	bmcs.set("https://b", Answer{}, context.DeadlineExceeded)
	b := waitStatus(t, p, "b", func(s Status, ok bool) bool { return ok && s.Err != nil })
	if b.Reason != ReasonTimeout || b.PoweredOff(time.Now()) {
		t.Errorf("b after a timeout: %+v", b)
	}
	if v, _ := testutil.GetCounterMetricValue(pollErrors.WithLabelValues("b", ReasonTimeout)); v < 1 {
		t.Errorf("timeouts of b counted %v, want at least 1", v)
	}

	// a's BMC changes and b's goes: a's old answer is dropped, b forgotten.
	cfg.Store(cfgOf(machineWithBMC("a", "https://a2")))
	waitStatus(t, p, "a", func(s Status, ok bool) bool { return ok && s.Reason == ReasonUnreachable })
	waitStatus(t, p, "b", func(_ Status, ok bool) bool { return !ok })
}

// Status never waits for a BMC, however slow.
func TestStatusDoesNotWaitForASlowBMC(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	var cfg atomic.Pointer[config.Config]
	m := machineWithBMC("slow", "https://slow")
	m.BMC.Timeout, m.BMC.PollInterval = time.Hour, time.Hour
	cfg.Store(cfgOf(m))
	p := NewPoller(cfg.Load, querierFunc(func(ctx context.Context, _ *config.BMC) (Answer, error) {
		select {
		case <-block:
		case <-ctx.Done():
		}
		return Answer{}, ctx.Err()
	}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	if _, ok := p.Status("slow"); ok {
		t.Error("a BMC that has not answered has a status")
	}
	if d := time.Since(start); d > 10*time.Millisecond {
		t.Errorf("Status took %v", d)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context was done")
	}
}

type querierFunc func(ctx context.Context, b *config.BMC) (Answer, error)

func (f querierFunc) Query(ctx context.Context, b *config.BMC) (Answer, error) { return f(ctx, b) }

func TestReason(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"deadline", fmt.Errorf("get: %w", context.DeadlineExceeded), ReasonTimeout},
		{"refused", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, ReasonUnreachable},
		{"closed before the answer", &url.Error{Op: "Get", URL: "https://bmc/redfish/v1/", Err: io.EOF}, ReasonUnreachable},
		{"a file", &fileError{errors.New("read")}, ReasonFiles},
		{"no system", &systemError{"none"}, ReasonNoSystem},
		{"anything else", errors.New("unexpected JSON"), ReasonProtocol},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Reason(tt.err); got != tt.want {
				t.Errorf("Reason(%v) = %s, want %s", tt.err, got, tt.want)
			}
		})
	}
}

package membership

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// startMemberWith is startMember with a hold-down, hooks and a link of
// its own (nil: the real loopback's).
func startMemberWith(t *testing.T, name string, port int, seeds []string, obs Observation, holdDown time.Duration, hooks Hooks, link func(string) (bool, error)) *testMember {
	t.Helper()
	o := NewOptions()
	cfg := Config{
		Name: name, Interface: "lo", BindHost: "127.0.0.1", BindPort: port, Seeds: seeds,
		Key:           []byte("0123456789abcdef0123456789abcdef"),
		ProbeInterval: o.ProbeInterval, ProbeTimeout: o.ProbeTimeout, SuspicionMult: o.SuspicionMult,
		HoldDown: holdDown, ConflictProbeInterval: time.Second,
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &testMember{Gossip: New(cfg), stop: cancel, done: make(chan struct{})}
	if link != nil {
		m.linkState = link
	}
	if hooks.Sync == nil {
		hooks.Sync = func(bool) {}
	}
	if hooks.Announce == nil {
		hooks.Announce = func() {}
	}
	go func() {
		defer close(m.done)
		if err := m.Run(ctx, hooks); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}()
	m.Observe(obs)
	t.Cleanup(m.close)
	return m
}

func wantState(m *testMember, s State) func() error {
	return func() error {
		if st := m.Status(); st.State != s {
			return fmt.Errorf("state %s", st.State)
		}
		return nil
	}
}

// A change of this host's state that moves no address (here from HoldDown
// to Unhealthy: it owned nothing in either) still asks the agent to sync,
// which reports the state in LoadBalancer status.
func TestStateChangeAsksForASync(t *testing.T) {
	if testing.Short() {
		t.Skip("opens gossip sockets")
	}
	obs := Observation{VIPs: vips(4), NodesReachable: true}
	p1, p2 := freePort(t), freePort(t)
	seeds := []string{fmt.Sprintf("127.0.0.1:%d", p1), fmt.Sprintf("127.0.0.1:%d", p2)}
	first := startMemberWith(t, "lb-1", p1, seeds, obs, time.Minute, Hooks{}, nil)
	waitFor(t, "lb-1 ready", 10*time.Second, wantState(first, StateReady))
	var syncs atomic.Int32
	second := startMemberWith(t, "lb-2", p2, seeds, obs, time.Minute, Hooks{Sync: func(bool) { syncs.Add(1) }}, nil)
	waitFor(t, "lb-2 holding down", 10*time.Second, wantState(second, StateHoldDown))
	time.Sleep(2 * time.Second) // what joining asked for is done
	before := syncs.Load()
	second.Observe(Observation{VIPs: vips(4), NodesReachable: false})
	waitFor(t, "lb-2 unhealthy", 5*time.Second, wantState(second, StateUnhealthy))
	waitFor(t, "a sync asked for after the state changed", 5*time.Second, func() error {
		if n := syncs.Load(); n == before {
			return fmt.Errorf("%d syncs asked for, as before", n)
		}
		return nil
	})
}

// LinkUp is called when the interface comes back up, once, and not at
// the start.
func TestLinkUpHook(t *testing.T) {
	if testing.Short() {
		t.Skip("opens gossip sockets")
	}
	var up atomic.Bool
	up.Store(true)
	var calls atomic.Int32
	m := startMemberWith(t, "lb-1", freePort(t), nil, Observation{VIPs: vips(2), NodesReachable: true}, time.Second,
		Hooks{LinkUp: func() { calls.Add(1) }}, func(string) (bool, error) { return up.Load(), nil })
	waitFor(t, "ready", 10*time.Second, wantState(m, StateReady))
	up.Store(false)
	waitFor(t, "unhealthy with the link down", 5*time.Second, wantState(m, StateUnhealthy))
	if n := calls.Load(); n != 0 {
		t.Fatalf("LinkUp called %d times before the link came back", n)
	}
	up.Store(true)
	waitFor(t, "LinkUp called", 5*time.Second, func() error {
		if n := calls.Load(); n != 1 {
			return fmt.Errorf("LinkUp called %d times", n)
		}
		return nil
	})
	waitFor(t, "ready again", 10*time.Second, wantState(m, StateReady))
	if n := calls.Load(); n != 1 {
		t.Errorf("LinkUp called %d times, want once", n)
	}
}

package membership

import (
	"context"
	"fmt"
	"net/netip"
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

// A host that becomes Ready after its hold-down (taking its share back)
// tells the others only once the sync it asked for has ended (SyncWait):
// until then the other host goes on owning every address, so that each
// is held by someone throughout the take-back.
func TestReadyIsToldAfterTheSync(t *testing.T) {
	if testing.Short() {
		t.Skip("opens gossip sockets")
	}
	all := vips(8)
	obs := Observation{VIPs: all, NodesReachable: true}
	p1, p2 := freePort(t), freePort(t)
	seeds := []string{fmt.Sprintf("127.0.0.1:%d", p1), fmt.Sprintf("127.0.0.1:%d", p2)}
	first := startMemberWith(t, "lb-1", p1, seeds, obs, time.Minute, Hooks{}, nil)
	waitFor(t, "lb-1 ready", 10*time.Second, wantState(first, StateReady))
	syncing, release := make(chan struct{}), make(chan struct{})
	var waits atomic.Int32
	hooks := Hooks{SyncWait: func(ctx context.Context, _ bool) {
		if waits.Add(1) == 1 {
			close(syncing)
		}
		select {
		case <-release:
		case <-ctx.Done():
			t.Errorf("SyncWait's context ended (%v) before the sync did", ctx.Err())
		}
	}}
	second := startMemberWith(t, "lb-2", p2, seeds, obs, 2*time.Second, hooks, nil)
	select {
	case <-syncing:
	case <-time.After(15 * time.Second):
		t.Fatal("lb-2 never waited for a sync")
	}
	if st := second.Status().State; st != StateReady {
		t.Fatalf("lb-2 waits for its sync in state %s, want %s", st, StateReady)
	}
	var share []netip.Addr
	for _, v := range all {
		if Owner(v, []string{"lb-1", "lb-2"}) == "lb-2" {
			share = append(share, v)
		}
	}
	if len(share) == 0 {
		t.Fatal("lb-2 has no share of 8 addresses to take back; pick others")
	}
	// While lb-2's sync runs, lb-1 has not heard that it is Ready: it
	// still owns lb-2's share (gossip would carry the state in well under
	// this time).
	for end := time.Now().Add(readyWait / 2); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		for _, v := range share {
			if !first.Owns(v) {
				t.Fatalf("lb-1 gave up %s while lb-2's sync was still running", v)
			}
		}
	}
	close(release)
	waitFor(t, "lb-1 hands lb-2 its share once lb-2's sync ended", 5*time.Second, func() error {
		for _, v := range share {
			if first.Owns(v) {
				return fmt.Errorf("lb-1 still owns %s", v)
			}
		}
		return nil
	})
	if n := waits.Load(); n != 1 {
		t.Errorf("lb-2 waited for %d syncs, want 1 (only when it became Ready)", n)
	}
}

// What a host publishes takes addresses over when it names a BGP family or
// a host group it did not name before.
func TestAdds(t *testing.T) {
	for _, c := range []struct {
		before, after []string
		want          bool
	}{
		{nil, nil, false},
		{nil, []string{"ipv4"}, true},
		{[]string{"ipv4"}, []string{"ipv4"}, false},
		{[]string{"ipv4", "ipv6"}, []string{"ipv4"}, false}, // lost one: the others take it
		{[]string{"ipv4"}, []string{"ipv4", "ipv6"}, true},
		{[]string{"a"}, []string{"b"}, true},
	} {
		if got := adds(c.before, c.after); got != c.want {
			t.Errorf("adds(%q, %q) = %v, want %v", c.before, c.after, got, c.want)
		}
	}
}

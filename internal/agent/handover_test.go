package agent

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	v1alpha1 "github.com/groundcloud/groundcloud/api/v1alpha1"
)

func TestHandOvers(t *testing.T) {
	v, v6, w := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("192.0.2.9")
	lb1, lb2 := netip.MustParseAddr("192.0.2.11"), netip.MustParseAddr("192.0.2.12")
	vips := []netip.Addr{v, v6, w}
	var h handOvers
	t0 := time.Unix(1000, 0)
	step := func(at time.Duration, held map[netip.Addr]bool, holders map[netip.Addr]netip.Addr) (map[netip.Addr]netip.Addr, time.Time) {
		return h.next(t0.Add(at), vips, func(a netip.Addr) bool { return held[a] }, func(a netip.Addr) netip.Addr { return holders[a] })
	}
	eq := cmpopts.EquateComparable(netip.Addr{})
	for _, s := range []struct {
		name        string
		at          time.Duration
		held        map[netip.Addr]bool
		holders     map[netip.Addr]netip.Addr
		want        map[netip.Addr]netip.Addr
		wantExpires time.Duration // 0: none
	}{
		{"w held from the start: nobody to hand over from", 0, map[netip.Addr]bool{w: true},
			map[netip.Addr]netip.Addr{v: lb1, v6: lb1}, nil, 0},
		{"v and v6 taken over from lb-1 (its address is IPv4)", time.Second, map[netip.Addr]bool{v: true, v6: true, w: true},
			nil, map[netip.Addr]netip.Addr{v: lb1}, time.Second + handOverWindow},
		{"still within the window", 30 * time.Second, map[netip.Addr]bool{v: true, v6: true, w: true},
			nil, map[netip.Addr]netip.Addr{v: lb1}, time.Second + handOverWindow},
		{"the window is over", time.Second + handOverWindow, map[netip.Addr]bool{v: true, v6: true, w: true},
			nil, nil, 0},
		{"v given to lb-2", 2 * handOverWindow, map[netip.Addr]bool{w: true},
			map[netip.Addr]netip.Addr{v: lb2}, nil, 0},
		{"and taken back from it", 2*handOverWindow + time.Second, map[netip.Addr]bool{v: true, w: true},
			nil, map[netip.Addr]netip.Addr{v: lb2}, 2*handOverWindow + time.Second + handOverWindow},
	} {
		got, expires := step(s.at, s.held, s.holders)
		if diff := cmp.Diff(s.want, got, eq); diff != "" {
			t.Errorf("%s: hand-over (-want +got):\n%s", s.name, diff)
		}
		var want time.Time
		if s.wantExpires > 0 {
			want = t0.Add(s.wantExpires)
		}
		if !expires.Equal(want) {
			t.Errorf("%s: expires %v, want %v", s.name, expires, want)
		}
	}
}

// holdingOwner is ownerOf that also says who else holds an address.
type holdingOwner struct {
	ownerOf
	holders map[netip.Addr]netip.Addr
}

func (o *holdingOwner) Holder(v netip.Addr) (string, netip.Addr) {
	o.mu.Lock()
	defer o.mu.Unlock()
	a, ok := o.holders[v]
	if !ok {
		return "", netip.Addr{}
	}
	return "other", a
}

// A sync that takes an address over from a host still up gives the data
// plane that host's address for it (in the same sync, before the address
// is added); one that releases it, or hands it over itself, does not.
func TestSyncHandsOverFromThePreviousHolder(t *testing.T) {
	noCheck := func(lb *v1alpha1.LoadBalancer) { lb.Spec.HealthCheck = nil }
	vip, other := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.11")
	owner := &holdingOwner{holders: map[netip.Addr]netip.Addr{vip: other}}
	owner.set()
	dp := &failingDataPlane{}
	a := testAgent(t, Config{DataPlane: dp, Addresses: &recordingAddresses{}, Owner: owner},
		newLB("web", noCheck, withAddresses(vip.String()), withForwarding(v1alpha1.ForwardingProxy)))
	startInformer(t, a)
	last := func() map[netip.Addr]netip.Addr {
		t.Helper()
		if err := a.sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		dp.mu.Lock()
		defer dp.mu.Unlock()
		return dp.states[len(dp.states)-1].HandOver
	}
	if got := last(); got != nil {
		t.Errorf("held elsewhere: hand-over %v, want none", got)
	}
	owner.set(vip)
	owner.mu.Lock()
	owner.holders = nil // this host is the holder now
	owner.mu.Unlock()
	if got := last(); got[vip] != other || len(got) != 1 {
		t.Errorf("taken over: hand-over %v, want %s from %s", got, vip, other)
	}
	owner.mu.Lock()
	owner.releasing = map[netip.Addr]bool{vip: true}
	owner.mu.Unlock()
	if got := last(); got != nil {
		t.Errorf("handed over by this host itself: hand-over %v, want none", got)
	}
}

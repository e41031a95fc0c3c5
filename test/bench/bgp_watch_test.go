package bench

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/groundcloud/groundcloud/test/framework/availability"
	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

// nexthops records which load-balancer hosts the router forwards each
// address of a range to: the next hops of its kernel's host routes (what
// FRR installed from BGP), sampled every few milliseconds. It is the BGP
// counterpart of availability.Holders.
type nexthops struct {
	within netip.Prefix
	names  map[netip.Addr]string // host address -> host name
	handle *netlink.Handle
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	current map[netip.Addr][]string
	changes []availability.Change
}

// watchNexthops starts sampling router's routes to addresses within every
// interval until stop.
func watchNexthops(router *netlab.Host, hosts []*netlab.Host, within netip.Prefix, every time.Duration) (*nexthops, error) {
	w := &nexthops{within: within, names: map[netip.Addr]string{}, current: map[netip.Addr][]string{}, done: make(chan struct{})}
	for _, h := range hosts {
		w.names[h.Addr4] = h.Name
	}
	if err := router.Do(func() (err error) {
		w.handle, err = netlink.NewHandle() // its socket stays in the router's namespace
		return err
	}); err != nil {
		return nil, fmt.Errorf("watch routes of %s: %w", router.Name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	w.sample()
	go func() {
		defer close(w.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				w.sample()
			}
		}
	}()
	return w, nil
}

func (w *nexthops) stop() {
	w.cancel()
	<-w.done
	w.handle.Close()
}

func (w *nexthops) sample() {
	now := time.Now()
	routes, err := w.handle.RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		return
	}
	seen := map[netip.Addr][]string{}
	for _, r := range routes {
		if dst, ok := hostRoute(r); ok && w.within.Contains(dst) {
			seen[dst] = w.hostsOf(r)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for a, hosts := range seen {
		if !slices.Equal(w.current[a], hosts) {
			w.changes = append(w.changes, availability.Change{At: now, VIP: a, Hosts: hosts})
			w.current[a] = hosts
		}
	}
	for a, hosts := range w.current {
		if _, ok := seen[a]; !ok && len(hosts) > 0 {
			w.changes = append(w.changes, availability.Change{At: now, VIP: a})
			w.current[a] = nil
		}
	}
}

// hostRoute returns the address of a /32 route.
func hostRoute(r netlink.Route) (netip.Addr, bool) {
	if r.Dst == nil || r.Type != unix.RTN_UNICAST {
		return netip.Addr{}, false
	}
	a, ok := netip.AddrFromSlice(r.Dst.IP)
	if ones, bits := r.Dst.Mask.Size(); !ok || ones != bits {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// hostsOf names r's gateways (their addresses when not a known host),
// sorted.
func (w *nexthops) hostsOf(r netlink.Route) []string {
	var gws []netip.Addr
	if a, ok := netip.AddrFromSlice(r.Gw); ok {
		gws = append(gws, a.Unmap())
	}
	for _, nh := range r.MultiPath {
		if a, ok := netip.AddrFromSlice(nh.Gw); ok {
			gws = append(gws, a.Unmap())
		}
	}
	var out []string
	for _, g := range gws {
		if name, ok := w.names[g]; ok {
			out = append(out, name)
		} else {
			out = append(out, g.String())
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// changesOf returns a's changes since since, led by its state at since.
func (w *nexthops) changesOf(a netip.Addr, since time.Time) []availability.Change {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []availability.Change
	var before *availability.Change
	for i, c := range w.changes {
		if c.VIP != a {
			continue
		}
		if c.At.Before(since) {
			before = &w.changes[i]
			continue
		}
		out = append(out, c)
	}
	if before != nil {
		out = append([]availability.Change{{At: since, VIP: a, Hosts: before.Hosts}}, out...)
	}
	return out
}

func (w *nexthops) now(a netip.Addr) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.current[a])
}

// waitOnly waits until the router forwards a to exactly hosts, and has for
// stable, and returns how long it waited.
func (w *nexthops) waitOnly(t *testing.T, a netip.Addr, stable time.Duration, hosts ...*netlab.Host) time.Duration {
	t.Helper()
	var want []string
	for _, h := range hosts {
		want = append(want, h.Name)
	}
	slices.Sort(want)
	start := time.Now()
	deadline := start.Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		ch := w.changesOf(a, time.Now().Add(-stable))
		if len(ch) == 1 && slices.Equal(ch[0].Hosts, want) {
			return time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the router's route to %s does not go to %v alone for %s within 2 minutes: %v", a, want, stable, w.now(a))
	return 0
}

// bgpWatch follows an address that every host announces over BGP: trial
// n fails host n mod 2; the host no longer serves once the router's route
// has lost it (withdrawn, or the session's hold timer expired).
type bgpWatch struct {
	nh  *nexthops
	vip netip.Addr
	lbs []*netlab.Host
}

func (w *bgpWatch) settled(t *testing.T, n int) int {
	t.Helper()
	w.nh.waitOnly(t, w.vip, 2*time.Second, w.lbs...)
	return n % len(w.lbs)
}

func (w *bgpWatch) moved(t *testing.T, i int, since time.Time) time.Duration {
	t.Helper()
	name := w.lbs[i].Name
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, c := range w.nh.changesOf(w.vip, since) {
			if !slices.Contains(c.Hosts, name) {
				return c.At.Sub(since)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the router still forwards %s to %s 30 s after the fault: %v", w.vip, name, w.nh.now(w.vip))
	return 0
}

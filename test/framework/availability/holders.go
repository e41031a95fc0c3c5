package availability

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

// Change is the set of hosts holding one virtual IP from At on.
type Change struct {
	At    time.Time
	VIP   netip.Addr
	Hosts []string // sorted; empty when none holds it
}

// Moves counts how often an address went to a host that did not hold it
// just before (ignoring moments when no host held it): 0 for an address
// that stayed, 1 for a failover or a return, 2 for there and back.
func Moves(changes []Change) int {
	moves := 0
	var last []string
	for _, c := range changes {
		if len(c.Hosts) == 0 {
			continue
		}
		if last != nil {
			for _, h := range c.Hosts {
				if !slices.Contains(last, h) {
					moves++
					break
				}
			}
		}
		last = c.Hosts
	}
	return moves
}

// Holders records which hosts hold which host addresses (/32, /128) on
// their lab interface, sampled every few milliseconds.
type Holders struct {
	hosts   []*netlab.Host
	handles []*netlink.Handle
	every   time.Duration
	stop    context.CancelFunc
	done    chan struct{}

	mu      sync.Mutex
	current map[netip.Addr][]string
	changes []Change
}

// WatchHolders starts sampling the hosts every interval until Stop.
func WatchHolders(hosts []*netlab.Host, every time.Duration) (*Holders, error) {
	w := &Holders{hosts: hosts, every: every, current: map[netip.Addr][]string{}, done: make(chan struct{})}
	for _, h := range hosts {
		var handle *netlink.Handle
		if err := h.Do(func() (err error) {
			handle, err = netlink.NewHandle() // its socket stays in h's namespace
			return err
		}); err != nil {
			w.closeHandles()
			return nil, fmt.Errorf("watch addresses of %s: %w", h.Name, err)
		}
		w.handles = append(w.handles, handle)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.stop = cancel
	w.sample()
	go w.run(ctx)
	return w, nil
}

func (w *Holders) run(ctx context.Context) {
	defer close(w.done)
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.sample()
		}
	}
}

func (w *Holders) sample() {
	now := time.Now()
	seen := map[netip.Addr][]string{}
	for i, h := range w.hosts {
		link, err := w.handles[i].LinkByName(h.Iface)
		if err != nil {
			continue
		}
		addrs, err := w.handles[i].AddrList(link, netlink.FAMILY_ALL)
		if err != nil {
			continue
		}
		for _, a := range addrs {
			ip, ok := netip.AddrFromSlice(a.IP)
			ones, bits := a.Mask.Size()
			if ok && ones == bits && (ip.Unmap() != h.Addr4 && ip != h.Addr6) {
				seen[ip.Unmap()] = append(seen[ip.Unmap()], h.Name)
			}
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for v, hosts := range seen {
		slices.Sort(hosts)
		if !slices.Equal(w.current[v], hosts) {
			w.changes = append(w.changes, Change{At: now, VIP: v, Hosts: hosts})
			w.current[v] = hosts
		}
	}
	for v, hosts := range w.current {
		if _, ok := seen[v]; !ok && len(hosts) > 0 {
			w.changes = append(w.changes, Change{At: now, VIP: v})
			w.current[v] = nil
		}
	}
}

// Now returns the hosts holding v at the last sample.
func (w *Holders) Now(v netip.Addr) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.current[v])
}

// Changes returns v's changes since since, led by its state at since.
func (w *Holders) Changes(v netip.Addr, since time.Time) []Change {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []Change
	var before *Change
	for i, c := range w.changes {
		if c.VIP != v {
			continue
		}
		if c.At.Before(since) {
			before = &w.changes[i]
			continue
		}
		out = append(out, c)
	}
	if before != nil {
		out = append([]Change{{At: since, VIP: v, Hosts: before.Hosts}}, out...)
	}
	return out
}

// WaitHeld waits until exactly one host holds v and returns it.
func (w *Holders) WaitHeld(ctx context.Context, v netip.Addr, limit time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		if h := w.Now(v); len(h) == 1 {
			return h[0], nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("%s not held by exactly one host within %s: %v", v, limit, w.Now(v))
		case <-time.After(w.every):
		}
	}
}

// Stop ends the sampling.
func (w *Holders) Stop() {
	w.stop()
	<-w.done
	w.closeHandles()
}

func (w *Holders) closeHandles() {
	for _, h := range w.handles {
		h.Close()
	}
}

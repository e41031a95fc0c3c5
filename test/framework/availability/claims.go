package availability

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/groundcloud/groundcloud/internal/layer2"
	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

// Claim is a station claiming an address on a client's link, as the
// client saw it: an ARP announcement or reply (an unsolicited or
// solicited Neighbor Advertisement for IPv6).
type Claim struct {
	At  time.Time
	VIP netip.Addr
	MAC string
	// Active: an announcement (a program sent it), not a kernel's answer.
	Active bool
}

// Claims records every claim another station makes on a host's link,
// with the guard the agents use (internal/layer2), until Stop.
type Claims struct {
	stop context.CancelFunc
	done chan struct{}

	mu     sync.Mutex
	claims []Claim
}

// WatchClaims starts recording the claims h sees on its lab interface.
func WatchClaims(h *netlab.Host) (*Claims, error) {
	var g *layer2.Guard
	err := h.Do(func() error {
		ifi, err := net.InterfaceByName(h.Iface)
		if err != nil {
			return err
		}
		if g, err = layer2.OpenGuard(ifi.Index, ifi.HardwareAddr); err != nil {
			return err
		}
		if err := g.WatchIPv6(h.Iface); err != nil {
			_ = g.Close()
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Claims{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		defer func() { _ = g.Close() }()
		g.Listen(ctx, func(cl layer2.Claim) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.claims = append(c.claims, Claim{At: time.Now(), VIP: cl.Addr, MAC: cl.MAC, Active: cl.Active})
		})
	}()
	return c, nil
}

// Stop ends the recording.
func (c *Claims) Stop() {
	c.stop()
	<-c.done
}

// Of returns the claims of vip seen from since on, in order.
func (c *Claims) Of(vip netip.Addr, since time.Time) []Claim {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Claim
	for _, cl := range c.claims {
		if cl.VIP == vip.Unmap() && !cl.At.Before(since) {
			out = append(out, cl)
		}
	}
	return out
}

// DrawnBack returns the first claim of vip by mac, from since on, that
// came after another station had claimed it: the moment a client on the
// link was told to go back to a host that gave the address away (ok
// false when none did).
func (c *Claims) DrawnBack(vip netip.Addr, mac string, since time.Time) (Claim, bool) {
	other := false
	for _, cl := range c.Of(vip, since) {
		switch {
		case cl.MAC != mac && cl.MAC != "":
			other = true
		case cl.MAC == mac && other:
			return cl, true
		}
	}
	return Claim{}, false
}

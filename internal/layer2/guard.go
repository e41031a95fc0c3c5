package layer2

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// Claim is a packet on the link in which another station claims an
// address: it probes for it, announces it, answers for it or sends from it.
type Claim struct {
	Addr netip.Addr
	// MAC is the claiming station's link-layer address; "" for an IPv6 DAD
	// probe, which carries none (see ndp.go).
	MAC string
	// Active: an agent claims the address (an ARP probe or announcement,
	// an IPv6 DAD probe), not only a kernel that holds it.
	Active bool
}

// Guard is the wire side of split-brain detection on one interface: it
// probes the addresses its caller holds (IPv4 with an RFC 5227 ARP probe,
// IPv6 with an RFC 4862 DAD probe: see ndp.go), which teaches receivers
// nothing, and reads every ARP frame and Neighbor Discovery message in
// which another station claims an address. What a claim means, and what
// to do about it, is its caller's to decide.
type Guard struct {
	self net.HardwareAddr
	arp  *arpSocket
	ndp  *ndpSocket // nil: IPv6 addresses are not watched
}

// OpenGuard opens the ARP socket of the interface with index ifindex,
// whose link-layer address is self. It watches IPv4 addresses only until
// WatchIPv6.
func OpenGuard(ifindex int, self net.HardwareAddr) (*Guard, error) {
	arp, err := openARPSocket(ifindex)
	if err != nil {
		return nil, err
	}
	return &Guard{self: self, arp: arp}, nil
}

// WatchIPv6 opens the Neighbor Discovery sockets of the interface, named
// ifname; call it before Listen. Without them only IPv4 addresses are
// watched.
func (g *Guard) WatchIPv6(ifname string) error {
	ndp, err := openNDPSocket(ifname, g.arp.ifindex)
	if err != nil {
		return err
	}
	g.ndp = ndp
	return nil
}

// WatchesIPv6 reports whether WatchIPv6 succeeded.
func (g *Guard) WatchesIPv6() bool { return g.ndp != nil }

// Close closes the Guard's sockets.
func (g *Guard) Close() error {
	var errs []error
	if g.ndp != nil {
		errs = append(errs, g.ndp.close())
	}
	errs = append(errs, g.arp.close())
	return errors.Join(errs...)
}

// Listen calls claimed with every claim another station makes on the link
// until ctx ends. It reads ARP and Neighbor Discovery on a goroutine each:
// claimed must be safe for concurrent use.
func (g *Guard) Listen(ctx context.Context, claimed func(Claim)) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { listen(ctx, "ARP", g.arpReader(), claimed) })
	if g.ndp != nil {
		wg.Go(func() { listen(ctx, "Neighbor Discovery", g.ndpReader(), claimed) })
	}
}

// Follow joins the solicited-node groups of the IPv6 addresses of addrs and
// leaves the others, so that probes for an address this host wants are
// heard even while it does not hold it. Without IPv6 it does nothing.
func (g *Guard) Follow(addrs []netip.Addr) error {
	if g.ndp == nil {
		return nil
	}
	var v6 []netip.Addr
	for _, a := range addrs {
		if a.Is6() {
			v6 = append(v6, a)
		}
	}
	return g.ndp.follow(v6)
}

// Probe sends a probe for each of addrs: an ARP probe for an IPv4 address,
// a DAD probe for an IPv6 one (none without IPv6). A probe that cannot be
// sent is logged.
func (g *Guard) Probe(ctx context.Context, addrs []netip.Addr) {
	logger := klog.FromContext(ctx)
	for _, a := range addrs {
		var err error
		switch {
		case a.Is4():
			err = g.arp.send(arpProbe(g.self, a))
		case g.ndp != nil:
			err = g.ndp.send(dadProbe(g.self, a))
		default:
			continue
		}
		if err != nil {
			logger.V(2).Info("Cannot send probe", "address", a, "err", err)
		}
	}
}

// A reader waits for the next packet (until its socket's timeout) and
// returns the claim in it; ok is false when none came or it claims nothing.
type reader func() (c Claim, ok bool, err error)

func (g *Guard) arpReader() reader {
	buf := make([]byte, 1600)
	return func() (Claim, bool, error) {
		frame, ok, err := g.arp.receive(buf)
		if err != nil || !ok {
			return Claim{}, false, err
		}
		p, ok := parseARP(frame)
		if !ok {
			return Claim{}, false, nil
		}
		c, ok := claimARP(p, g.self)
		return c, ok, nil
	}
}

func (g *Guard) ndpReader() reader {
	buf, oob := make([]byte, 1600), make([]byte, 128)
	return func() (Claim, bool, error) {
		msg, src, ok, err := g.ndp.receive(buf, oob)
		if err != nil || !ok {
			return Claim{}, false, err
		}
		p, ok := parseNDP(src, msg)
		if !ok {
			return Claim{}, false, nil
		}
		c, ok := claimNDP(p, g.self)
		return c, ok, nil
	}
}

// listen passes the claims read to claimed until ctx ends.
func listen(ctx context.Context, what string, read reader, claimed func(Claim)) {
	for ctx.Err() == nil {
		c, ok, err := read()
		if err != nil {
			klog.FromContext(ctx).V(4).Info("Cannot read "+what, "err", err) // e.g. while the link is down
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if ok {
			claimed(c)
		}
	}
}

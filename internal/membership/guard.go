package membership

import (
	"context"
	"maps"
	"net"
	"net/netip"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// guard watches the interface for split brains (see conflict.go): once per
// ConflictProbeInterval it probes each address this host holds (IPv4 with
// an RFC 5227 ARP probe, IPv6 with an RFC 4862 DAD probe: see ndp.go), and
// it records every ARP frame and Neighbor Discovery message in which
// another station claims one of the virtual IPs. It acts on the decisions:
// yielding withdraws an address (a sync), defending announces the held
// ones again. Without IPv6 on the interface only IPv4 addresses are
// watched.
func (c *Cluster) guard(ctx context.Context, hooks Hooks, ifc netInterface) {
	logger := klog.FromContext(ctx)
	arp, err := openARPSocket(ifc.index)
	if err != nil {
		c.mu.Lock()
		c.guardOff = true
		c.mu.Unlock()
		logger.Error(err, "Cannot watch for split brains", "interface", c.cfg.Interface)
		return
	}
	defer func() { _ = arp.close() }()
	ndp, err := openNDPSocket(c.cfg.Interface, ifc.index)
	if err != nil {
		logger.Error(err, "Cannot watch IPv6 addresses for split brains", "interface", c.cfg.Interface)
	} else {
		defer func() { _ = ndp.close() }()
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	c.mu.Lock()
	c.listenSince = time.Now()
	c.mu.Unlock()
	wg.Go(func() { c.listen(ctx, "ARP", arpReader(arp, ifc.mac)) })
	if ndp != nil {
		wg.Go(func() { c.listen(ctx, "Neighbor Discovery", ndpReader(ndp, ifc.mac)) })
	}
	tick := time.NewTicker(c.cfg.ConflictProbeInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			c.guardRound(ctx, arp, ndp, ifc.mac, hooks)
		}
	}
}

// A reader waits for the next packet (until its socket's timeout) and
// returns how to classify it: nil when none came or it is not one to read.
type reader func() (classifier, error)

type classifier func(vips map[netip.Addr]bool, at time.Time) (sighting, bool)

func arpReader(sock *arpSocket, self net.HardwareAddr) reader {
	buf := make([]byte, 1600)
	return func() (classifier, error) {
		frame, ok, err := sock.receive(buf)
		if err != nil || !ok {
			return nil, err
		}
		p, ok := parseARP(frame)
		if !ok {
			return nil, nil
		}
		return func(vips map[netip.Addr]bool, at time.Time) (sighting, bool) { return classify(p, self, vips, at) }, nil
	}
}

func ndpReader(sock *ndpSocket, self net.HardwareAddr) reader {
	buf, oob := make([]byte, 1600), make([]byte, 128)
	return func() (classifier, error) {
		msg, src, ok, err := sock.receive(buf, oob)
		if err != nil || !ok {
			return nil, err
		}
		p, ok := parseNDP(src, msg)
		if !ok {
			return nil, nil
		}
		return func(vips map[netip.Addr]bool, at time.Time) (sighting, bool) { return classify6(p, self, vips, at) }, nil
	}
}

// listen records the sightings read until ctx ends.
func (c *Cluster) listen(ctx context.Context, what string, read reader) {
	for ctx.Err() == nil {
		classify, err := read()
		if err != nil {
			klog.FromContext(ctx).V(4).Info("Cannot read "+what, "err", err) // e.g. while the link is down
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if classify == nil {
			continue
		}
		c.mu.Lock()
		if s, ok := classify(c.vips, time.Now()); ok {
			c.conflicts.observe(s)
			if s.Active && s.MAC != "" {
				c.heard[s.MAC] = s.At // its agent serves (see presence.go)
			}
		}
		c.mu.Unlock()
	}
}

// guardRound probes the held addresses and acts on the conflicts. ndp is
// nil when IPv6 addresses are not watched.
func (c *Cluster) guardRound(ctx context.Context, arp *arpSocket, ndp *ndpSocket, self net.HardwareAddr, hooks Hooks) {
	logger := klog.FromContext(ctx)
	c.mu.Lock()
	var wanted, held, wanted6 []netip.Addr
	for _, v := range c.obs.VIPs {
		v = v.Unmap()
		if (v.Is6() && ndp == nil) || c.owner(v) != c.cfg.Name {
			continue
		}
		wanted = append(wanted, v)
		if v.Is6() {
			wanted6 = append(wanted6, v)
		}
		if !c.suppressed[v] {
			held = append(held, v)
		}
	}
	view := peerView{self: c.cfg.Name, hostOf: hostsByMAC(c.macs, c.apiMACs), alive: map[string]bool{}}
	for name := range c.peers {
		view.alive[name] = true
	}
	actions, changes := c.conflicts.decide(time.Now(), wanted, view)
	suppressed := map[netip.Addr]bool{}
	defend := false
	for v, a := range actions {
		suppressed[v] = a == ActionYield
		defend = defend || a == ActionDefend
	}
	maps.DeleteFunc(suppressed, func(_ netip.Addr, yield bool) bool { return !yield })
	withdrawn := !maps.Equal(suppressed, c.suppressed)
	c.suppressed = suppressed
	c.mu.Unlock()

	if ndp != nil {
		// Hear the probes for the addresses this host yields, too.
		if err := ndp.follow(wanted6); err != nil {
			logger.V(2).Info("Cannot join solicited-node groups", "err", err)
		}
	}
	for _, v := range held {
		var err error
		if v.Is4() {
			err = arp.send(arpProbe(self, v))
		} else {
			err = ndp.send(dadProbe(self, v))
		}
		if err != nil {
			logger.V(2).Info("Cannot send probe", "address", v, "err", err)
		}
	}
	for _, cf := range changes {
		recordConflict(cf)
		if cf.Action == ActionNone {
			logger.Info("Split brain resolved", "address", cf.VIP, "otherMAC", cf.MAC, "otherHost", cf.Host)
		} else {
			logger.Info("Split brain: another host answers for a virtual IP", "address", cf.VIP,
				"otherMAC", cf.MAC, "otherHost", cf.Host, "otherAgentActive", cf.Active, "action", cf.Action)
		}
		if hooks.Conflict != nil {
			hooks.Conflict(cf)
		}
	}
	if withdrawn {
		hooks.Sync(false)
	}
	if defend {
		hooks.Announce()
	}
	setConflicts(len(actions))
}

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

// guard watches the interface for split brains (see conflict.go): it
// probes each IPv4 address this host holds once per ConflictProbeInterval,
// records every ARP frame in which another station claims one of the
// virtual IPs, and acts on the decisions: yielding withdraws an address
// (a sync), defending announces the held ones again. IPv6 addresses are
// not watched.
func (c *Cluster) guard(ctx context.Context, hooks Hooks, ifc netInterface) {
	logger := klog.FromContext(ctx)
	sock, err := openARPSocket(ifc.index)
	if err != nil {
		logger.Error(err, "Cannot watch for split brains", "interface", c.cfg.Interface)
		return
	}
	defer func() { _ = sock.close() }()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { c.listen(ctx, sock, ifc.mac) })
	tick := time.NewTicker(c.cfg.ConflictProbeInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			c.guardRound(ctx, sock, ifc.mac, hooks)
		}
	}
}

// listen records sightings until ctx ends.
func (c *Cluster) listen(ctx context.Context, sock *arpSocket, self net.HardwareAddr) {
	buf := make([]byte, 1600)
	for ctx.Err() == nil {
		frame, ok, err := sock.receive(buf)
		if err != nil {
			klog.FromContext(ctx).V(4).Info("Cannot read ARP", "err", err) // e.g. while the link is down
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if !ok {
			continue
		}
		p, ok := parseARP(frame)
		if !ok {
			continue
		}
		c.mu.Lock()
		if s, ok := classify(p, self, c.vip4, time.Now()); ok {
			c.conflicts.observe(s)
		}
		c.mu.Unlock()
	}
}

// guardRound probes the held addresses and acts on the conflicts.
func (c *Cluster) guardRound(ctx context.Context, sock *arpSocket, self net.HardwareAddr, hooks Hooks) {
	logger := klog.FromContext(ctx)
	c.mu.Lock()
	var wanted, held []netip.Addr
	for _, v := range c.obs.VIPs {
		if v.Is4() && Owner(v, c.cands) == c.cfg.Name {
			wanted = append(wanted, v)
			if !c.suppressed[v] {
				held = append(held, v)
			}
		}
	}
	view := peerView{self: c.cfg.Name, hostOf: maps.Clone(c.macs), alive: map[string]bool{}}
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

	for _, v := range held {
		if err := sock.send(arpProbe(self, v)); err != nil {
			logger.V(2).Info("Cannot send ARP probe", "address", v, "err", err)
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

package membership

import (
	"context"
	"maps"
	"net/netip"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/groundcloud/groundcloud/internal/layer2"
)

// guard watches the interface for split brains (see conflict.go) with a
// layer2.Guard: once per ConflictProbeInterval it probes each address this
// host holds, and it records every claim another station makes on the link
// to one of the virtual IPs. It acts on the decisions: yielding withdraws
// an address (a sync), defending announces the held ones again. Without
// IPv6 on the interface only IPv4 addresses are watched.
func (c *Cluster) guard(ctx context.Context, hooks Hooks, ifc netInterface) {
	logger := klog.FromContext(ctx)
	g, err := layer2.OpenGuard(ifc.index, ifc.mac)
	if err != nil {
		c.mu.Lock()
		c.guardOff = true
		c.mu.Unlock()
		logger.Error(err, "Cannot watch for split brains", "interface", c.cfg.Interface)
		return
	}
	defer func() { _ = g.Close() }()
	if err := g.WatchIPv6(c.cfg.Interface); err != nil {
		logger.Error(err, "Cannot watch IPv6 addresses for split brains", "interface", c.cfg.Interface)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	c.mu.Lock()
	c.listenSince = time.Now()
	c.mu.Unlock()
	wg.Go(func() { g.Listen(ctx, c.claimed) })
	tick := time.NewTicker(c.cfg.ConflictProbeInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			c.guardRound(ctx, g, hooks)
		}
	}
}

// claimed records a claim another station made on the link, when it is
// one of the virtual IPs.
func (c *Cluster) claimed(cl layer2.Claim) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.vips[cl.Addr] {
		return
	}
	s := sighting{VIP: cl.Addr, MAC: cl.MAC, Active: cl.Active, At: time.Now()}
	c.conflicts.observe(s)
	if s.Active && s.MAC != "" {
		c.heard[s.MAC] = s.At // its agent serves (see presence.go)
	}
}

// guardRound probes the held addresses and acts on the conflicts.
func (c *Cluster) guardRound(ctx context.Context, g *layer2.Guard, hooks Hooks) {
	logger := klog.FromContext(ctx)
	c.mu.Lock()
	var wanted, held []netip.Addr
	for _, v := range c.obs.VIPs {
		v = v.Unmap()
		if (v.Is6() && !g.WatchesIPv6()) || c.owner(v) != c.cfg.Name {
			continue
		}
		wanted = append(wanted, v)
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

	// Hear the probes for the addresses this host yields, too.
	if err := g.Follow(wanted); err != nil {
		logger.V(2).Info("Cannot join solicited-node groups", "err", err)
	}
	g.Probe(ctx, held)
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

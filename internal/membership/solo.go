package membership

import (
	"context"
	"sync"

	"k8s.io/klog/v2"
)

// A lone load-balancer host (--vip-ownership=all, Config.Solo) shares its
// addresses with nobody, but a station that is no load-balancer host can
// still claim one: it runs the guard as a member does. It probes a new
// address before it first holds it (probe.go), and reports and defends
// one it holds (conflict.go); it owns every address otherwise, whatever
// its State, as it did without the guard: there is no other host to take
// them. It opens no gossip socket, and its Status says Solo.

// runSolo is Run for a lone host: the guard and the loop, without
// memberlist.
func (g *Gossip) runSolo(ctx context.Context, hooks Hooks) {
	logger := klog.FromContext(ctx)
	_, ifc, err := resolveLink(g.cfg.Interface)
	switch {
	case err != nil:
		g.noGuard()
		logger.Error(err, "Cannot watch the interface for stations claiming virtual IPs; new addresses are held without a probe", "interface", g.cfg.Interface)
	case ifc.mac == nil:
		g.noGuard()
		logger.Info("Interface has no Ethernet address; new addresses are held without a probe", "interface", g.cfg.Interface)
	default:
		g.mu.Lock()
		g.mac = ifc.mac.String()
		g.mu.Unlock()
	}
	if !g.waitObserved(ctx) {
		return
	}
	g.mu.Lock()
	g.joined = true // alone: nobody to join
	guard := !g.guardOff
	g.mu.Unlock()
	var wg sync.WaitGroup
	defer wg.Wait()
	if guard {
		wg.Go(func() { g.guard(ctx, hooks, ifc) })
		logger.Info("Lone load-balancer host: new addresses are probed before they are held, held ones are watched", "interface", g.cfg.Interface, "probes", g.cfg.AddressProbes)
	} else {
		hooks.Sync(false) // what waited for its probe is held now
	}
	g.loop(ctx, nil, hooks)
}

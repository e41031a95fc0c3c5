package loadbalancers

import (
	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/config"
)

// Announce is the LoadBalancer's spec.announce for an address of pool: its
// announce mode, host selector and BGP attributes. It is nil for an L2 pool
// served by every host (and without a pool), as objects written before the
// field existed say, so that those are not rewritten.
func Announce(pool *config.Pool) *v1alpha1.Announce {
	if pool == nil {
		return nil
	}
	sel := ""
	if pool.Hosts != nil && !pool.Hosts.Empty() {
		sel = pool.Hosts.String()
	}
	if pool.Announce != config.AnnounceBGP && sel == "" {
		return nil
	}
	a := &v1alpha1.Announce{Mode: v1alpha1.AnnounceL2, HostSelector: sel}
	if pool.Announce == config.AnnounceBGP {
		a.Mode = v1alpha1.AnnounceBGP
		for _, c := range pool.Communities {
			a.Communities = append(a.Communities, c.String())
		}
		if lp := pool.LocalPreference; lp != nil {
			v := int64(*lp)
			a.LocalPreference = &v
		}
	}
	return a
}

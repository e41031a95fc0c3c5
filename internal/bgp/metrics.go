package bgp

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	sessionUp = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "groundcloud",
		Subsystem:      "agent",
		Name:           "bgp_session_up",
		Help:           "1 while the BGP session with the peer (its [BGPPeer] name) is established, 0 otherwise.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"peer"})
	sessionDrops = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "groundcloud",
		Subsystem:      "agent",
		Name:           "bgp_session_drops_total",
		Help:           "Times an established BGP session with the peer went down.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"peer"})
	announcedRoutes = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "groundcloud",
		Subsystem:      "agent",
		Name:           "bgp_announced_routes",
		Help:           "Host routes this host advertises over an established BGP session, by family (ipv4, ipv6).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"family"})
)

var registerOnce sync.Once

// RegisterMetrics registers the speaker's metrics with the legacy registry, once.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(sessionUp, sessionDrops, announcedRoutes)
	})
}

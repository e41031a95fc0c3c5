package bfd

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	sessionUp = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "groundcloud",
		Subsystem:      "agent",
		Name:           "bfd_session_up",
		Help:           "1 while the BFD session with the peer (its [BGPPeer] name) is Up, 0 otherwise.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"peer"})
	sessionDowns = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "groundcloud",
		Subsystem:      "agent",
		Name:           "bfd_session_downs_total",
		Help:           "Times the BFD session with the peer left Up, by this host's diagnostic (detection time expired, neighbor signaled session down, administratively down).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"peer", "diagnostic"})
	discardedPackets = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "groundcloud",
		Subsystem:      "agent",
		Name:           "bfd_discarded_packets_total",
		Help:           "Received BFD packets discarded, by reason: ttl (not 255: not from a neighbour), invalid (fails RFC 5880's checks), unknown-peer (no session has its discriminator and source address), zero-discriminator (none, for a session past Down), session-busy (its session's queue was full).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})
)

var registerOnce sync.Once

// RegisterMetrics registers the sessions' metrics with the legacy
// registry, once.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(sessionUp, sessionDowns, discardedPackets)
	})
}

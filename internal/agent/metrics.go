package agent

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	syncDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace:      "groundcloud",
		Subsystem:      "agent",
		Name:           "sync_duration_seconds",
		Help:           "Time to program the data plane once (all families).",
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 15),
		StabilityLevel: metrics.ALPHA,
	})
	syncFailures = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      "groundcloud",
		Subsystem:      "agent",
		Name:           "sync_failures_total",
		Help:           "Data plane syncs that failed; each is followed by a full sync.",
		StabilityLevel: metrics.ALPHA,
	})
	statusWriteFailures = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      "groundcloud",
		Subsystem:      "agent",
		Name:           "status_write_failures_total",
		Help:           "LoadBalancer status writes that failed (retried on the next sync).",
		StabilityLevel: metrics.ALPHA,
	})
	conntrackCleanupErrors = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "groundcloud",
		Subsystem: "agent",
		Name:      "conntrack_cleanup_errors_total",
		Help: "Conntrack clean-ups that failed, by kind: stale-udp (entries of UDP flows whose backend left; retried) " +
			"and takeover (entries of an address this host takes over). They fail neither the sync nor the host's health.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind"})
	registerOnce sync.Once
)

// Kinds of conntrack clean-up (conntrack_cleanup_errors_total).
const (
	cleanupStaleUDP = "stale-udp"
	cleanupTakeover = "takeover"
)

// RegisterMetrics registers the agent's metrics, once.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(syncDuration, syncFailures, statusWriteFailures, conntrackCleanupErrors)
	})
}

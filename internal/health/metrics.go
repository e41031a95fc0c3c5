package health

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	probes = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "groundcloud",
		Subsystem:      "health",
		Name:           "probes_total",
		Help:           "Health probes of nodes by result (success, bad_status, timeout, error).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	targets = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "groundcloud",
		Subsystem:      "health",
		Name:           "targets",
		Help:           "Health check targets by state (unknown: not probed yet, healthy, unhealthy).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"state"})
	registerOnce sync.Once
)

// RegisterMetrics registers this package's metrics, once.
func RegisterMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(probes, targets) })
}

func recordTargets(counts map[State]int) {
	for _, s := range []State{Unknown, Healthy, Unhealthy} {
		targets.WithLabelValues(s.String()).Set(float64(counts[s]))
	}
}

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
		Help:           "Health check targets by state (healthy, unhealthy).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"state"})
	registerOnce sync.Once
)

// RegisterMetrics registers this package's metrics, once.
func RegisterMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(probes, targets) })
}

func recordTargets(total, unhealthy int) {
	targets.WithLabelValues("healthy").Set(float64(total - unhealthy))
	targets.WithLabelValues("unhealthy").Set(float64(unhealthy))
}

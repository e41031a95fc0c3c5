package outofservice

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	actions = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "groundcloud",
		Subsystem:      "out_of_service",
		Name:           "actions_total",
		Help:           "Out-of-service taints applied to and removed from Nodes whose machine's BMC said Off (action: apply, remove), and failed writes (result: error).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"action", "result"})
	tainted = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "groundcloud",
		Subsystem:      "out_of_service",
		Name:           "tainted_nodes",
		Help:           "Nodes that carry the out-of-service taint this controller applied.",
		StabilityLevel: metrics.ALPHA,
	})
	registerOnce sync.Once
)

// RegisterMetrics registers the metrics once.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(actions, tainted)
	})
}

package configwatch

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const (
	resultApplied    = "applied"
	resultInvalid    = "invalid"
	resultUnreadable = "unreadable"
)

var (
	reloads = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "groundcloud",
		Subsystem:      "cloud_config",
		Name:           "reloads_total",
		Help:           "Changes of the cloud-config file seen, by result: applied, invalid (the last good configuration stays), unreadable.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	lastApplied = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "groundcloud",
		Subsystem:      "cloud_config",
		Name:           "last_applied_timestamp_seconds",
		Help:           "Unix time at which a changed cloud-config was last applied.",
		StabilityLevel: metrics.ALPHA,
	})
	registerOnce sync.Once
)

// RegisterMetrics registers this package's metrics with the component-base
// legacy registry, once.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(reloads, lastApplied)
	})
}

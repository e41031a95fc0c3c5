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
	lastReloadSuccessful = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "groundcloud",
		Subsystem:      "cloud_config",
		Name:           "last_reload_successful",
		Help:           "1 when the cloud-config file as it is now is in force, 0 when it is unreadable or its last change was invalid (the last good configuration stays in force).",
		StabilityLevel: metrics.ALPHA,
	})
	registerOnce sync.Once
)

// RegisterMetrics registers this package's metrics with the component-base
// legacy registry, once.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(reloads, lastApplied, lastReloadSuccessful)
		// Every series from 0, so that increase() in alerts sees the first.
		for _, r := range []string{resultApplied, resultInvalid, resultUnreadable} {
			reloads.WithLabelValues(r)
		}
	})
}

func setReloadSuccessful(ok bool) {
	if ok {
		lastReloadSuccessful.Set(1)
		return
	}
	lastReloadSuccessful.Set(0)
}

package bmc

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	up = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "groundcloud",
		Subsystem:      "bmc",
		Name:           "up",
		Help:           "1 when the last poll of the machine's BMC was answered, 0 when it failed (groundcloud_bmc_poll_errors_total says why).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"machine"})
	powerState = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "groundcloud",
		Subsystem:      "bmc",
		Name:           "power_state",
		Help:           "1 for the Redfish PowerState (On, Off, PoweringOn, PoweringOff, Paused) the machine's BMC last answered; no series while its last poll failed.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"machine", "state"})
	pollErrors = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "groundcloud",
		Subsystem:      "bmc",
		Name:           "poll_errors_total",
		Help:           "Failed polls of the machine's BMC, by reason: timeout, unreachable, tls, unauthorized, files, no-system, protocol.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"machine", "reason"})
	pollDuration = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "groundcloud",
		Subsystem:      "bmc",
		Name:           "last_poll_duration_seconds",
		Help:           "How long the last poll of the machine's BMC took, answered or not.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"machine"})
	lastAnswer = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "groundcloud",
		Subsystem:      "bmc",
		Name:           "last_answer_timestamp_seconds",
		Help:           "Unix time of the last answer of the machine's BMC.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"machine"})
	registerOnce sync.Once
)

// RegisterMetrics registers this package's metrics with the component-base
// legacy registry, once.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(up, powerState, pollErrors, pollDuration, lastAnswer)
	})
}

// startMetrics makes a machine's error series from 0, so that increase()
// in alerts sees the first error.
func startMetrics(machine string) {
	for _, r := range reasons {
		pollErrors.WithLabelValues(machine, r)
	}
}

// forgetMetrics drops a machine's series when its BMC leaves the
// cloud-config or changes.
func forgetMetrics(machine string) {
	up.DeleteLabelValues(machine)
	pollDuration.DeleteLabelValues(machine)
	lastAnswer.DeleteLabelValues(machine)
	for _, r := range reasons {
		pollErrors.DeleteLabelValues(machine, r)
	}
	powerState.DeletePartialMatch(map[string]string{"machine": machine})
}

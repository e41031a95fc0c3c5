package health

import (
	"strings"
	"testing"

	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
)

func TestMetrics(t *testing.T) {
	RegisterMetrics()
	RegisterMetrics() // once only: a second call must not panic

	env := newCheckerEnv(t, Options{FailureThreshold: 1}, 0)
	a, b := target("192.0.2.10", 10256), target("192.0.2.11", 10256)
	env.checker.SetTargets([]Target{a, b})
	env.run()
	for range 2 {
		c := env.expectProbe()
		if c.target == a {
			c.reply <- errProbe
		} else {
			c.reply <- nil
		}
	}
	env.expectChange()
	waitFor(t, func() bool { return env.checker.State(a) == Unhealthy && env.checker.State(b) == Healthy })

	want := `
# HELP groundcloud_health_targets [ALPHA] Health check targets by state (unknown: not probed yet, healthy, unhealthy).
# TYPE groundcloud_health_targets gauge
groundcloud_health_targets{state="healthy"} 1
groundcloud_health_targets{state="unhealthy"} 1
groundcloud_health_targets{state="unknown"} 0
`
	if err := testutil.GatherAndCompare(legacyregistry.DefaultGatherer, strings.NewReader(want), "groundcloud_health_targets"); err != nil {
		t.Error(err)
	}
	for _, result := range []string{resultSuccess, resultError} {
		if v, err := testutil.GetCounterMetricValue(probes.WithLabelValues(result)); err != nil || v < 1 {
			t.Errorf("probes_total{result=%q} = %v, %v; want >= 1", result, v, err)
		}
	}
}

package loadbalancers

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/groundcloud/groundcloud/internal/ipam"
)

var (
	writes = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "groundcloud",
		Subsystem:      "loadbalancer",
		Name:           "object_writes_total",
		Help:           "Writes of LoadBalancer objects by the controller manager, by verb (create, update, delete).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"verb"})
	poolAddresses = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "groundcloud",
		Subsystem:      "pool",
		Name:           "addresses",
		Help:           "Addresses of each pool and family: size, and used.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"pool", "family", "kind"})
	registerOnce sync.Once
)

// RegisterMetrics registers this package's metrics, once.
func RegisterMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(writes, poolAddresses) })
}

func recordUsage(usage []ipam.PoolUsage) {
	for _, u := range usage {
		poolAddresses.WithLabelValues(u.Pool, string(u.Family), "size").Set(float64(u.Size))
		poolAddresses.WithLabelValues(u.Pool, string(u.Family), "used").Set(float64(u.Used))
	}
}

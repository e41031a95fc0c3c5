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
		Help:           "Writes of LoadBalancer objects by the controller manager, by verb (create, update, delete; patch: its AddressOrphaned condition).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"verb"})
	poolAddresses = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "groundcloud",
		Subsystem:      "pool",
		Name:           "addresses",
		Help:           "Addresses of each pool and family: size, and used.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"pool", "family", "kind"})
	orphanedAddressesGauge = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "groundcloud",
		Subsystem: "pool",
		Name:      "orphaned_addresses",
		Help: "Addresses kept by Services although no pool their namespace may use contains them any more, " +
			"by the pool they were given from (which may be gone). See docs/controller-manager.md#orphaned-addresses.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"pool"})
	registerOnce sync.Once
)

// RegisterMetrics registers this package's metrics, once.
func RegisterMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(writes, poolAddresses, orphanedAddressesGauge) })
}

// recordOrphans sets the orphaned addresses of each pool: 0 for each
// configured pool without any, and a series for each pool, configured or
// gone, that has some.
func recordOrphans(pools []string, byPool map[string]int) {
	orphanedAddressesGauge.Reset()
	for _, pool := range pools {
		orphanedAddressesGauge.WithLabelValues(pool).Set(0)
	}
	for pool, n := range byPool {
		orphanedAddressesGauge.WithLabelValues(pool).Set(float64(n))
	}
}

func recordUsage(usage []ipam.PoolUsage) {
	for _, u := range usage {
		poolAddresses.WithLabelValues(u.Pool, string(u.Family), "size").Set(float64(u.Size))
		poolAddresses.WithLabelValues(u.Pool, string(u.Family), "used").Set(float64(u.Used))
	}
}

package agent

import (
	"slices"
	"strings"
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/groundcloud/groundcloud/internal/dataplane"
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
	programmed = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "groundcloud",
		Subsystem:      "agent",
		Name:           "programmed",
		Help:           "1 when the last sync programmed the data plane and the virtual IPs (the host's Programmed condition), 0 when it failed.",
		StabilityLevel: metrics.ALPHA,
	})
	virtualIPs = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "groundcloud",
		Subsystem:      "agent",
		Name:           "virtual_ips",
		Help:           "Usable virtual IPs of all LoadBalancers that a load-balancer host holds on its interface (L2 pools; BGP addresses are advertised, not held), which the hosts share (0 with --vip-ownership=none: another program holds them).",
		StabilityLevel: metrics.ALPHA,
	})
	virtualIPsHeld = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "groundcloud",
		Subsystem:      "agent",
		Name:           "virtual_ips_held",
		Help:           "Virtual IPs this host holds (0 while it cannot set them).",
		StabilityLevel: metrics.ALPHA,
	})
	noHealthyBackends = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "groundcloud",
		Subsystem:      "agent",
		Name:           "no_healthy_backends",
		Help:           "1 for each LoadBalancer (namespace/name) none of whose backends is healthy: its connections are refused. LoadBalancers with a healthy backend are not listed.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"loadbalancer"})
	offLinkBackends = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "groundcloud",
		Subsystem: "agent",
		Name:      "passthrough_off_link_backends",
		Help: "Backends of each passthrough LoadBalancer (namespace/name) that share no link with this host, " +
			"so passthrough forwarding gives them no flows. LoadBalancers without such backends are not listed.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"loadbalancer"})
	cloudConfigProblems = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: "groundcloud",
		Subsystem: "agent",
		Name:      "cloud_config_problems",
		Help: "Problems in the cloud-config the agent started with, in any section (also those it does not read), " +
			"and password files of its BGP peers it could not read; it goes on with the parts it can use. 0: none.",
		StabilityLevel: metrics.ALPHA,
	})
	bgpPeersLeftOut = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "groundcloud",
		Subsystem:      "agent",
		Name:           "bgp_peers_left_out",
		Help:           "[BGPPeer] sections of the cloud-config this host opens no session with because of a problem in the section or, for one that selects the host, in its password-file.",
		StabilityLevel: metrics.ALPHA,
	})
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
		legacyregistry.MustRegister(syncDuration, syncFailures, statusWriteFailures, conntrackCleanupErrors,
			programmed, virtualIPs, virtualIPsHeld, noHealthyBackends, offLinkBackends,
			cloudConfigProblems, bgpPeersLeftOut, trafficReadFailures)
	})
}

// recordOffLink sets passthrough_off_link_backends to now (comma-separated
// node lists by LoadBalancer), dropping the LoadBalancers of before that
// are no longer in it.
func recordOffLink(before, now map[string]string) {
	for name := range before {
		if _, ok := now[name]; !ok {
			offLinkBackends.DeleteLabelValues(name)
		}
	}
	for name, list := range now {
		offLinkBackends.WithLabelValues(name).Set(float64(strings.Count(list, ",") + 1))
	}
}

// syncMetrics sets the gauges of one sync's outcome. It remembers the
// LoadBalancers it listed without a healthy backend, to drop them when
// they recover or go.
type syncMetrics struct {
	unserved []string
}

// record sets the gauges after a sync of st that programmed the data plane
// (or failed with syncErr) and set held of all addresses on the host (or
// failed with addrErr); holds is false when another program holds them.
func (m *syncMetrics) record(st dataplane.State, all, held int, holds bool, syncErr, addrErr error) {
	programmed.Set(boolValue(syncErr == nil && addrErr == nil))
	if !holds {
		all, held = 0, 0
	}
	if addrErr != nil {
		held = 0
	}
	virtualIPs.Set(float64(all))
	virtualIPsHeld.Set(float64(held))
	unserved := withoutHealthyBackends(st)
	for _, name := range m.unserved {
		if !slices.Contains(unserved, name) {
			noHealthyBackends.DeleteLabelValues(name)
		}
	}
	for _, name := range unserved {
		noHealthyBackends.WithLabelValues(name).Set(1)
	}
	m.unserved = unserved
}

// withoutHealthyBackends lists the services none of whose backends is
// healthy (or that have none), sorted.
func withoutHealthyBackends(st dataplane.State) []string {
	var names []string
	for _, svc := range st.Services {
		if !slices.ContainsFunc(svc.Backends, func(b dataplane.Backend) bool { return b.Healthy }) {
			names = append(names, svc.Name)
		}
	}
	slices.Sort(names)
	return names
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

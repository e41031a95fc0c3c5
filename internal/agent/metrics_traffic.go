package agent

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/groundcloud/groundcloud/internal/dataplane"
)

// Values of --traffic-counters.
const (
	TrafficCountersNode    = "node"
	TrafficCountersAddress = "address"
	TrafficCountersNone    = "none"
)

// trafficCounting turns --traffic-counters into what the data plane counts.
func trafficCounting(flag string) (dataplane.Counting, error) {
	switch flag {
	case TrafficCountersNode:
		return dataplane.Counting{Frontends: true, Nodes: true}, nil
	case TrafficCountersAddress:
		return dataplane.Counting{Frontends: true}, nil
	case TrafficCountersNone:
		return dataplane.Counting{}, nil
	}
	return dataplane.Counting{}, fmt.Errorf("--traffic-counters %q: want %s, %s or %s", flag, TrafficCountersNode, TrafficCountersAddress, TrafficCountersNone)
}

var (
	frontendLabels = []string{"namespace", "service", "address", "protocol", "port"}
	vipPackets     = metrics.NewDesc("groundcloud_agent_vip_packets_total",
		"Packets clients sent to a virtual IP's port that this host forwarded (proxy or passthrough; --traffic-counters), from an nftables counter read at each scrape.",
		frontendLabels, nil, metrics.ALPHA, "")
	vipBytes = metrics.NewDesc("groundcloud_agent_vip_bytes_total",
		"Bytes (IP packets, headers included) clients sent to a virtual IP's port that this host forwarded (proxy or passthrough; --traffic-counters), from an nftables counter read at each scrape.",
		frontendLabels, nil, metrics.ALPHA, "")
	vipNewConnections = metrics.NewDesc("groundcloud_agent_vip_new_connections_total",
		"New connections (TCP) and flows (UDP) to a virtual IP's port that this host forwarded in proxy mode to a node (--traffic-counters=node), from an nftables counter read at each scrape.",
		append(frontendLabels[:len(frontendLabels):len(frontendLabels)], "node"), nil, metrics.ALPHA, "")
	trafficReadFailures = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      "groundcloud",
		Subsystem:      "agent",
		Name:           "traffic_counter_read_failures_total",
		Help:           "Scrapes at which reading the data plane's traffic counters failed; that scrape has no groundcloud_agent_vip_* series.",
		StabilityLevel: metrics.ALPHA,
	})
)

// trafficReadTimeout bounds one read of the counters (two nft commands).
const trafficReadTimeout = 10 * time.Second

// trafficCollector reports the data plane's traffic counters at each
// scrape: nothing is read between scrapes, and no status is written.
type trafficCollector struct {
	metrics.BaseStableCollector
	read func(context.Context) ([]dataplane.CounterReading, error)
}

// newTrafficCollector returns a collector over read (a Syncer's
// ReadCounters).
func newTrafficCollector(read func(context.Context) ([]dataplane.CounterReading, error)) *trafficCollector {
	return &trafficCollector{read: read}
}

func (c *trafficCollector) DescribeWithStability(ch chan<- *metrics.Desc) {
	ch <- vipPackets
	ch <- vipBytes
	ch <- vipNewConnections
}

func (c *trafficCollector) CollectWithStability(ch chan<- metrics.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), trafficReadTimeout)
	defer cancel()
	readings, err := c.read(ctx)
	if err != nil {
		trafficReadFailures.Inc()
		klog.Background().Error(err, "Reading the traffic counters failed")
		return
	}
	for _, m := range trafficMetrics(readings) {
		ch <- m
	}
}

// trafficMetrics turns counter readings into series: packets and bytes of
// each received counter, new connections (the counter's packets) of each
// connections one.
func trafficMetrics(readings []dataplane.CounterReading) []metrics.Metric {
	out := make([]metrics.Metric, 0, 2*len(readings))
	for _, r := range readings {
		ns, name, _ := strings.Cut(r.Service, "/")
		labels := []string{ns, name, r.VIP.String(), strings.ToLower(string(r.Protocol)), strconv.Itoa(int(r.Port))}
		switch r.Kind {
		case dataplane.CountReceived:
			out = append(out,
				metrics.NewLazyConstMetric(vipPackets, metrics.CounterValue, float64(r.Packets), labels...),
				metrics.NewLazyConstMetric(vipBytes, metrics.CounterValue, float64(r.Bytes), labels...))
		case dataplane.CountConnections:
			out = append(out, metrics.NewLazyConstMetric(vipNewConnections, metrics.CounterValue, float64(r.Packets), append(labels, r.Node)...))
		}
	}
	return out
}

var registerTrafficOnce sync.Once

// registerTrafficMetrics registers the collector of the traffic counters
// over read, once.
func registerTrafficMetrics(read func(context.Context) ([]dataplane.CounterReading, error)) {
	registerTrafficOnce.Do(func() {
		legacyregistry.CustomMustRegister(newTrafficCollector(read))
	})
}

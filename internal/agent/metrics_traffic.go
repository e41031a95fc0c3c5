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
	vipConnections = metrics.NewDesc("groundcloud_agent_vip_connections",
		"Current connections to a virtual IP's port that this host forwards in proxy mode to a node (--traffic-counters=node): TCP connections conntrack has ESTABLISHED and UDP flows it tracks, counted at each scrape.",
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
	// count counts the current connections of connection counters, by
	// name (NetlinkConntrack CountConnections); nil: not reported.
	count func(context.Context, []dataplane.TrafficCounter) (map[string]int, error)
}

// newTrafficCollector returns a collector over read (a Syncer's
// ReadCounters) and count.
func newTrafficCollector(read func(context.Context) ([]dataplane.CounterReading, error),
	count func(context.Context, []dataplane.TrafficCounter) (map[string]int, error)) *trafficCollector {
	return &trafficCollector{read: read, count: count}
}

func (c *trafficCollector) DescribeWithStability(ch chan<- *metrics.Desc) {
	ch <- vipPackets
	ch <- vipBytes
	ch <- vipNewConnections
	ch <- vipConnections
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
	if c.count == nil {
		return
	}
	var counters []dataplane.TrafficCounter
	for _, r := range readings {
		if r.Kind == dataplane.CountConnections {
			counters = append(counters, r.TrafficCounter)
		}
	}
	if len(counters) == 0 {
		return
	}
	current, err := c.count(ctx, counters)
	if err != nil {
		trafficReadFailures.Inc()
		klog.Background().Error(err, "Counting the current connections failed")
		return
	}
	for _, m := range connectionMetrics(counters, current) {
		ch <- m
	}
}

// connectionMetrics are the current connections of each connection
// counter (0 when conntrack has none).
func connectionMetrics(counters []dataplane.TrafficCounter, current map[string]int) []metrics.Metric {
	out := make([]metrics.Metric, 0, len(counters))
	for _, tc := range counters {
		ns, name, _ := strings.Cut(tc.Service, "/")
		labels := []string{ns, name, tc.VIP.String(), strings.ToLower(string(tc.Protocol)), strconv.Itoa(int(tc.Port)), tc.Node}
		out = append(out, metrics.NewLazyConstMetric(vipConnections, metrics.GaugeValue, float64(current[tc.Name]), labels...))
	}
	return out
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
// over read and count, once.
func registerTrafficMetrics(read func(context.Context) ([]dataplane.CounterReading, error),
	count func(context.Context, []dataplane.TrafficCounter) (map[string]int, error)) {
	registerTrafficOnce.Do(func() {
		legacyregistry.CustomMustRegister(newTrafficCollector(read, count))
	})
}

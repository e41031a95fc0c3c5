package agent

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"

	"github.com/groundcloud/groundcloud/internal/dataplane"
)

func TestTrafficCounting(t *testing.T) {
	tests := []struct {
		flag    string
		want    dataplane.Counting
		wantErr bool
	}{
		{flag: "node", want: dataplane.Counting{Frontends: true, Nodes: true}},
		{flag: "address", want: dataplane.Counting{Frontends: true}},
		{flag: "none"},
		{flag: "", wantErr: true},
		{flag: "on", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.flag, func(t *testing.T) {
			got, err := trafficCounting(tt.flag)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("trafficCounting(%q) = %+v, %v; want %+v, error %v", tt.flag, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// TestTrafficCollector: each scrape reads the counters and reports them
// with their labels, and the current connections of each connection
// counter (0 when conntrack has none); a failed read reports none and
// counts the failure.
func TestTrafficCollector(t *testing.T) {
	readings := []dataplane.CounterReading{
		{TrafficCounter: dataplane.TrafficCounter{Kind: dataplane.CountReceived, Service: "shop/web",
			VIP: netip.MustParseAddr("192.0.2.100"), Protocol: dataplane.TCP, Port: 80}, Packets: 12, Bytes: 3400},
		{TrafficCounter: dataplane.TrafficCounter{Kind: dataplane.CountReceived, Service: "infra/dns",
			VIP: netip.MustParseAddr("2001:db8::101"), Protocol: dataplane.UDP, Port: 53}, Packets: 2, Bytes: 150},
		{TrafficCounter: dataplane.TrafficCounter{Name: "nc-a", Kind: dataplane.CountConnections, Service: "shop/web",
			VIP: netip.MustParseAddr("192.0.2.100"), Protocol: dataplane.TCP, Port: 80, Node: "node-a"}, Packets: 3, Bytes: 180},
		{TrafficCounter: dataplane.TrafficCounter{Name: "nc-b", Kind: dataplane.CountConnections, Service: "shop/web",
			VIP: netip.MustParseAddr("192.0.2.100"), Protocol: dataplane.TCP, Port: 80, Node: "node-b"}, Packets: 0, Bytes: 0},
	}
	var readErr error
	reg := metrics.NewKubeRegistry()
	var asked []string
	reg.CustomMustRegister(newTrafficCollector(func(context.Context) ([]dataplane.CounterReading, error) {
		return readings, readErr
	}, func(_ context.Context, counters []dataplane.TrafficCounter) (map[string]int, error) {
		asked = asked[:0]
		for _, c := range counters {
			asked = append(asked, c.Name)
		}
		return map[string]int{"nc-a": 2}, nil
	}))
	want := `
# HELP groundcloud_agent_vip_bytes_total [ALPHA] Bytes (IP packets, headers included) clients sent to a virtual IP's port that this host forwarded (proxy or passthrough; --traffic-counters), from an nftables counter read at each scrape.
# TYPE groundcloud_agent_vip_bytes_total counter
groundcloud_agent_vip_bytes_total{address="192.0.2.100",namespace="shop",port="80",protocol="tcp",service="web"} 3400
groundcloud_agent_vip_bytes_total{address="2001:db8::101",namespace="infra",port="53",protocol="udp",service="dns"} 150
# HELP groundcloud_agent_vip_connections [ALPHA] Current connections to a virtual IP's port that this host forwards in proxy mode to a node (--traffic-counters=node): TCP connections conntrack has ESTABLISHED and UDP flows it tracks, counted at each scrape.
# TYPE groundcloud_agent_vip_connections gauge
groundcloud_agent_vip_connections{address="192.0.2.100",namespace="shop",node="node-a",port="80",protocol="tcp",service="web"} 2
groundcloud_agent_vip_connections{address="192.0.2.100",namespace="shop",node="node-b",port="80",protocol="tcp",service="web"} 0
# HELP groundcloud_agent_vip_new_connections_total [ALPHA] New connections (TCP) and flows (UDP) to a virtual IP's port that this host forwarded in proxy mode to a node (--traffic-counters=node), from an nftables counter read at each scrape.
# TYPE groundcloud_agent_vip_new_connections_total counter
groundcloud_agent_vip_new_connections_total{address="192.0.2.100",namespace="shop",node="node-a",port="80",protocol="tcp",service="web"} 3
groundcloud_agent_vip_new_connections_total{address="192.0.2.100",namespace="shop",node="node-b",port="80",protocol="tcp",service="web"} 0
# HELP groundcloud_agent_vip_packets_total [ALPHA] Packets clients sent to a virtual IP's port that this host forwarded (proxy or passthrough; --traffic-counters), from an nftables counter read at each scrape.
# TYPE groundcloud_agent_vip_packets_total counter
groundcloud_agent_vip_packets_total{address="192.0.2.100",namespace="shop",port="80",protocol="tcp",service="web"} 12
groundcloud_agent_vip_packets_total{address="2001:db8::101",namespace="infra",port="53",protocol="udp",service="dns"} 2
`
	names := []string{"groundcloud_agent_vip_packets_total", "groundcloud_agent_vip_bytes_total", "groundcloud_agent_vip_new_connections_total", "groundcloud_agent_vip_connections"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	if diff := cmp.Diff([]string{"nc-a", "nc-b"}, asked); diff != "" {
		t.Errorf("connections counted for (-want +got):\n%s", diff)
	}

	RegisterMetrics()
	before, _ := testutil.GetCounterMetricValue(trafficReadFailures)
	readErr = errors.New("nft: no such table")
	got, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range got {
		if strings.HasPrefix(mf.GetName(), "groundcloud_agent_vip_") {
			t.Errorf("a failed read reported %s", mf.GetName())
		}
	}
	after, _ := testutil.GetCounterMetricValue(trafficReadFailures)
	if diff := cmp.Diff(before+1, after); diff != "" {
		t.Errorf("traffic_counter_read_failures_total (-want +got):\n%s", diff)
	}
}

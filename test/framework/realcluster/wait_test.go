package realcluster

import (
	"strings"
	"testing"
)

func TestSyncedFamilies(t *testing.T) {
	const (
		help   = "# HELP kubeproxy_sync_proxy_rules_last_timestamp_seconds The last time proxy rules were successfully synced\n# TYPE kubeproxy_sync_proxy_rules_last_timestamp_seconds gauge\n"
		queued = "# TYPE kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds gauge\nkubeproxy_sync_proxy_rules_last_queued_timestamp_seconds{ip_family=\"IPv4\"} 1.7645e+09\n"
	)
	for _, tc := range []struct {
		name, metrics string
		want          int
		err           bool
	}{
		{name: "starting", metrics: queued, want: 0},
		{name: "IPv4 synced", metrics: queued + help + "kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family=\"IPv4\"} 1.7645e+09\n", want: 1},
		{name: "both synced", metrics: help + "kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family=\"IPv4\"} 1.7645e+09\nkubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family=\"IPv6\"} 1.7645e+09\n", want: 2},
		{name: "zero", metrics: help + "kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family=\"IPv6\"} 0\n", want: 0},
		{name: "not the text format", metrics: "kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family=\"IPv6\"} x\n", err: true},
	} {
		got, err := syncedFamilies(strings.NewReader(tc.metrics))
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("%s: syncedFamilies = %d, %v; want %d, error %v", tc.name, got, err, tc.want, tc.err)
		}
	}
}

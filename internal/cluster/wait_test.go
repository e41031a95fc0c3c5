package cluster

import "testing"

func TestSyncedFamilies(t *testing.T) {
	for _, tc := range []struct {
		name, metrics string
		want          int
	}{
		{"starting", "# HELP kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds x\nkubeproxy_sync_proxy_rules_last_queued_timestamp_seconds{ip_family=\"IPv4\"} 1.7645e+09\n", 0},
		{"IPv4 synced", "# TYPE kubeproxy_sync_proxy_rules_last_timestamp_seconds gauge\nkubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family=\"IPv4\"} 1.7645e+09\n", 1},
		{"both synced", "kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family=\"IPv4\"} 1.7645e+09\nkubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family=\"IPv6\"} 1.7645e+09\n", 2},
		{"zero", "kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family=\"IPv6\"} 0\n", 0},
		{"not a number", "kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family=\"IPv6\"} x\n", 0},
	} {
		if got := syncedFamilies(tc.metrics); got != tc.want {
			t.Errorf("%s: syncedFamilies = %d, want %d", tc.name, got, tc.want)
		}
	}
}

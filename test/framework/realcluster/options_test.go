package realcluster

import (
	"net/netip"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	good := Options{Dir: "/tmp/x", ToolsDir: "/work/tools"}.withDefaults()
	tests := []struct {
		name    string
		change  func(*Options)
		problem string // "" for none
	}{
		{name: "defaults", change: func(*Options) {}},
		{name: "relative dir", change: func(o *Options) { o.Dir = "x" }, problem: "want an absolute path"},
		{name: "dir a node cannot see", change: func(o *Options) { o.Dir = "/var/lib/groundcloud" }, problem: "nodes cannot see /var/lib"},
		{name: "tools a node cannot see", change: func(o *Options) { o.ToolsDir = "/run/tools" }, problem: "ToolsDir /run/tools"},
		{name: "no workers", change: func(o *Options) { o.Workers = -1 }, problem: "Workers -1"},
		{name: "two IPv4 cluster CIDRs", change: func(o *Options) { o.ClusterCIDR = "10.1.0.0/16,10.2.0.0/16" }, problem: "an IPv4 and an IPv6"},
		{name: "families differ", change: func(o *Options) { o.ClusterCIDR = "10.244.0.0/16" }, problem: "same families"},
		{name: "single stack", change: func(o *Options) { o.ClusterCIDR, o.ServiceCIDR = "10.244.0.0/16", "10.96.0.0/16" }},
		{name: "apiserver address in the pod network", change: func(o *Options) { o.APIServerAddress = netip.MustParseAddr("10.244.0.1") }, problem: "is in 10.244.0.0/16"},
		{name: "node port addresses", change: func(o *Options) { o.NodePortAddresses = []string{"100.64.0.0/16", "primary"} }},
		{name: "node port address not a CIDR", change: func(o *Options) { o.NodePortAddresses = []string{"100.64.0.1"} }, problem: `NodePortAddresses "100.64.0.1"`},
		{name: "apiserver address in the lab", change: func(o *Options) { o.APIServerAddress = netip.MustParseAddr("192.0.2.9") }, problem: "is in 192.0.2.0/24"},
		{name: "IPv6 only", change: func(o *Options) {
			o.ClusterCIDR, o.ServiceCIDR, o.APIServerAddress = "fd00:10:244::/56", "fd00:10:96::/112", DefaultAPIServerAddress6
		}},
		{name: "IPv6 first", change: func(o *Options) {
			o.ClusterCIDR, o.ServiceCIDR, o.APIServerAddress = "fd00:10:244::/56,10.244.0.0/16", "fd00:10:96::/112,10.96.0.0/16", DefaultAPIServerAddress6
		}},
		{name: "families in another order", change: func(o *Options) { o.ServiceCIDR = "fd00:10:96::/112,10.96.0.0/16" }, problem: "in the same order"},
		{name: "IPv6 only with an IPv4 apiserver address", change: func(o *Options) { o.ClusterCIDR, o.ServiceCIDR = "fd00:10:244::/56", "fd00:10:96::/112" }, problem: "first family"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := good
			tt.change(&o)
			err := o.Validate()
			switch {
			case tt.problem == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tt.problem != "" && (err == nil || !strings.Contains(err.Error(), tt.problem)):
				t.Errorf("error %v, want one saying %q", err, tt.problem)
			}
		})
	}
}

func TestKubeProxyConfigNodePortAddresses(t *testing.T) {
	if cfg := kubeProxyConfig("10.244.0.0/16", nil); strings.Contains(cfg, "nodePortAddresses") {
		t.Errorf("without NodePortAddresses the config sets them:\n%s", cfg)
	}
	cfg := kubeProxyConfig("10.244.0.0/16", []string{"100.64.0.0/16", "fd00::/64"})
	if !strings.HasSuffix(cfg, "nodePortAddresses:\n  - \"100.64.0.0/16\"\n  - \"fd00::/64\"\n") {
		t.Errorf("config:\n%s", cfg)
	}
}

// An IPv6-only cluster's apiserver address defaults to an IPv6 one.
func TestIPv6OnlyDefaults(t *testing.T) {
	o := Options{Dir: "/tmp/x", ToolsDir: "/work/tools", ClusterCIDR: "fd00:10:244::/56", ServiceCIDR: "fd00:10:96::/112"}.withDefaults()
	if o.APIServerAddress != DefaultAPIServerAddress6 {
		t.Errorf("APIServerAddress %s, want %s", o.APIServerAddress, DefaultAPIServerAddress6)
	}
	if err := o.Validate(); err != nil {
		t.Error(err)
	}
}

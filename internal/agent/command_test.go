package agent

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
)

func TestProfilingNeedsMetricsAddress(t *testing.T) {
	o := NewOptions()
	o.Interface = "eth0"
	o.Profiling = true
	o.MetricsBindAddress = ""
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--profiling") {
		t.Fatalf("Validate = %v, want an error about --profiling", err)
	}
	if NewCommand().Flags().Lookup("profiling").DefValue != "false" {
		t.Error("--profiling must default to false")
	}
}

// TestLoneAgentValidatesItsProbes: a lone agent (--vip-ownership=all)
// needs no gossip key, but bad probe settings are refused with the flag
// named, every one at once.
func TestLoneAgentValidatesItsProbes(t *testing.T) {
	o := NewOptions()
	o.Interface = "eth0"
	if o.Ownership != OwnershipAll {
		t.Fatalf("default --vip-ownership %q, want all", o.Ownership)
	}
	if err := o.Validate(); err != nil {
		t.Fatalf("defaults, no gossip key: %v", err)
	}
	o.Membership.AddressProbes = 11
	o.Membership.ConflictProbeInterval = 0
	err := o.Validate()
	for _, want := range []string{"--address-probes 11 must be 0 to 10", "--conflict-probe-interval 0s must be at least 100ms"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v, want %q", err, want)
		}
	}
}

func TestServeMetricsProfiling(t *testing.T) {
	for _, profiling := range []bool{false, true} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		_ = ln.Close()
		ctx, cancel := context.WithCancel(context.Background())
		if err := serveMetrics(ctx, addr, profiling, func() error { return nil }, func() error { return nil }); err != nil {
			cancel()
			t.Fatal(err)
		}
		resp, err := http.Get("http://" + addr + "/debug/pprof/heap")
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if want := map[bool]int{false: http.StatusNotFound, true: http.StatusOK}[profiling]; resp.StatusCode != want {
			t.Errorf("profiling=%v: GET /debug/pprof/heap = %d, want %d", profiling, resp.StatusCode, want)
		}
	}
}

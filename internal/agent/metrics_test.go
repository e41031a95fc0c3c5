package agent

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/groundcloud/groundcloud/internal/dataplane"
)

func healthList(healthy ...bool) []dataplane.Backend {
	var out []dataplane.Backend
	for _, h := range healthy {
		out = append(out, dataplane.Backend{Node: "n", Healthy: h})
	}
	return out
}

func TestWithoutHealthyBackends(t *testing.T) {
	st := dataplane.State{Services: []dataplane.Service{
		{Name: "ns/z-none", Backends: nil},
		{Name: "ns/all-down", Backends: healthList(false, false)},
		{Name: "ns/one-up", Backends: healthList(false, true)},
		{Name: "ns/all-up", Backends: healthList(true)},
	}}
	want := []string{"ns/all-down", "ns/z-none"}
	if diff := cmp.Diff(want, withoutHealthyBackends(st)); diff != "" {
		t.Errorf("withoutHealthyBackends (-want +got):\n%s", diff)
	}
}

// TestSyncMetrics: the gauges follow each sync; a LoadBalancer that
// recovers leaves the list.
func TestSyncMetrics(t *testing.T) {
	RegisterMetrics()
	var m syncMetrics
	down := dataplane.State{Services: []dataplane.Service{
		{Name: "a/web", Backends: healthList(false)},
		{Name: "b/dns", Backends: nil},
		{Name: "c/ok", Backends: healthList(true)},
	}}
	recovered := dataplane.State{Services: []dataplane.Service{
		{Name: "a/web", Backends: healthList(true)},
		{Name: "b/dns", Backends: nil},
	}}
	steps := []struct {
		name             string
		st               dataplane.State
		all, held        int
		holds            bool
		syncErr, addrErr error
		want             []string
	}{
		{
			name: "programmed, two without a healthy backend", st: down, all: 3, held: 2, holds: true,
			want: []string{"programmed 1", "virtual_ips 3", "virtual_ips_held 2", `no_healthy_backends{loadbalancer="a/web"} 1`, `no_healthy_backends{loadbalancer="b/dns"} 1`},
		},
		{
			name: "one recovered, data plane failed", st: recovered, all: 3, held: 2, holds: true, syncErr: errors.New("nft"),
			want: []string{"programmed 0", "virtual_ips 3", "virtual_ips_held 2", `no_healthy_backends{loadbalancer="b/dns"} 1`},
		},
		{
			name: "addresses failed", st: recovered, all: 3, held: 2, holds: true, addrErr: errors.New("netlink"),
			want: []string{"programmed 0", "virtual_ips 3", "virtual_ips_held 0", `no_healthy_backends{loadbalancer="b/dns"} 1`},
		},
		{
			name: "addresses held by another program", st: dataplane.State{}, all: 3, held: 0, holds: false,
			want: []string{"programmed 1", "virtual_ips 0", "virtual_ips_held 0"},
		},
	}
	for _, s := range steps {
		m.record(s.st, s.all, s.held, s.holds, s.syncErr, s.addrErr)
		var want []string
		for _, w := range s.want {
			want = append(want, "groundcloud_agent_"+w)
		}
		slices.Sort(want)
		if diff := cmp.Diff(want, gaugeSamples(t, "groundcloud_agent_programmed", "groundcloud_agent_virtual_ips", "groundcloud_agent_virtual_ips_held", "groundcloud_agent_no_healthy_backends")); diff != "" {
			t.Errorf("after %s (-want +got):\n%s", s.name, diff)
		}
	}
}

// gaugeSamples returns the samples of the named gauges as sorted
// "name{labels} value" lines.
func gaugeSamples(t *testing.T, names ...string) []string {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range families {
		if !slices.Contains(names, f.GetName()) {
			continue
		}
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			labels := ""
			if len(ls) > 0 {
				labels = "{" + strings.Join(ls, ",") + "}"
			}
			out = append(out, fmt.Sprintf("%s%s %g", f.GetName(), labels, m.GetGauge().GetValue()))
		}
	}
	slices.Sort(out)
	return out
}

package metricscheck

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const page = `# HELP groundcloud_pool_addresses [ALPHA] Addresses of each pool and family: size, and used.
# TYPE groundcloud_pool_addresses gauge
groundcloud_pool_addresses{family="IPv4",kind="size",pool="default"} 51
groundcloud_pool_addresses{family="IPv4",kind="used",pool="default"} 1
# HELP groundcloud_agent_sync_duration_seconds [ALPHA] Time to program the data plane once (all families).
# TYPE groundcloud_agent_sync_duration_seconds histogram
groundcloud_agent_sync_duration_seconds_bucket{le="0.001"} 0
groundcloud_agent_sync_duration_seconds_bucket{le="+Inf"} 3
groundcloud_agent_sync_duration_seconds_sum 0.02
groundcloud_agent_sync_duration_seconds_count 3
# HELP groundcloud_agent_programmed [ALPHA] 1 when programmed.
# TYPE groundcloud_agent_programmed gauge
groundcloud_agent_programmed 1
`

func TestParseExposition(t *testing.T) {
	e := Exposed{}
	if err := e.ParseExposition(strings.NewReader(page)); err != nil {
		t.Fatal(err)
	}
	want := Exposed{
		"groundcloud_pool_addresses":                     {"family", "kind", "pool"},
		"groundcloud_agent_sync_duration_seconds_bucket": {"le"},
		"groundcloud_agent_sync_duration_seconds_sum":    nil,
		"groundcloud_agent_sync_duration_seconds_count":  nil,
		"groundcloud_agent_programmed":                   nil,
	}
	if diff := cmp.Diff(want, e); diff != "" {
		t.Errorf("exposed (-want +got):\n%s", diff)
	}
}

func TestProblems(t *testing.T) {
	exposed := Exposed{}
	if err := exposed.ParseExposition(strings.NewReader(page)); err != nil {
		t.Fatal(err)
	}
	expr := func(uses ...Use) Report {
		return Report{Expressions: []Expression{{Source: "rules.yaml: alert X", Uses: uses}}}
	}
	tests := []struct {
		name string
		rep  Report
		want []string
	}{
		{name: "labels it has", rep: expr(Use{Metric: "groundcloud_pool_addresses", Labels: []string{"kind", "pool"}})},
		{name: "histogram buckets", rep: expr(Use{Metric: "groundcloud_agent_sync_duration_seconds_bucket", Labels: []string{"le"}})},
		{name: "target labels", rep: expr(Use{Metric: "groundcloud_agent_programmed", Labels: []string{"instance", "job"}})},
		{
			name: "misspelt metric", rep: expr(Use{Metric: "groundcloud_pool_address"}),
			want: []string{"rules.yaml: alert X: metric groundcloud_pool_address is exposed by no binary"},
		},
		{
			name: "histogram without suffix", rep: expr(Use{Metric: "groundcloud_agent_sync_duration_seconds"}),
			want: []string{"rules.yaml: alert X: metric groundcloud_agent_sync_duration_seconds is exposed by no binary"},
		},
		{
			name: "label it lacks", rep: expr(Use{Metric: "groundcloud_pool_addresses", Labels: []string{"pools", "state"}}),
			want: []string{
				"rules.yaml: alert X: metric groundcloud_pool_addresses has no label pools (it has family, kind, pool)",
				"rules.yaml: alert X: metric groundcloud_pool_addresses has no label state (it has family, kind, pool)",
			},
		},
		{
			name: "a label on an unlabelled metric", rep: expr(Use{Metric: "groundcloud_agent_programmed", Labels: []string{"host"}}),
			want: []string{"rules.yaml: alert X: metric groundcloud_agent_programmed has no label host (it has none)"},
		},
		{name: "no metric", rep: expr(), want: []string{"rules.yaml: alert X: uses no metric"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Problems(tt.rep, exposed)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

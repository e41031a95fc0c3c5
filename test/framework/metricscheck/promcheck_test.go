package metricscheck

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/groundcloud/groundcloud/test/framework/controlplane"
)

// promcheck runs hack/tools/promcheck with one file, given as -rules or
// -dashboard, and returns its report and stderr.
func promcheck(t *testing.T, flag, content string) (Report, string, error) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs hack/tools/promcheck; skipped with -short")
	}
	bin, err := controlplane.ModuleTool(t.Context(), controlplane.ToolPromcheck)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "input")
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), bin, flag, file)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	rep, err := ReadReport(&stdout)
	if err != nil {
		t.Fatalf("%v (stderr %s)", err, stderr.String())
	}
	return rep, stderr.String(), runErr
}

func rules(expr string) string {
	return "groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: " + expr + "\n"
}

// TestPromcheckUses: the labels each expression relies on, per metric.
func TestPromcheckUses(t *testing.T) {
	tests := []struct {
		name, expr string
		want       []Use
	}{
		{
			name: "matchers and by",
			expr: `sum by (pool) (m{kind="used"})`,
			want: []Use{{Metric: "m", Labels: []string{"kind", "pool"}}},
		},
		{
			name: "ignoring and group_left",
			expr: `a / ignoring (kind) group_left (owner) b`,
			want: []Use{{Metric: "a", Labels: []string{"kind"}}, {Metric: "b", Labels: []string{"kind", "owner"}}},
		},
		{
			name: "without, on both sides",
			expr: `sum without (state) (a) < on (x) b`,
			want: []Use{{Metric: "a", Labels: []string{"state", "x"}}, {Metric: "b", Labels: []string{"x"}}},
		},
		{
			name: "a label the expression makes",
			expr: `sum by (host) (label_replace(a, "host", "$1", "instance", "(.*):.*"))`,
			want: []Use{{Metric: "a", Labels: []string{"instance"}}},
		},
		{
			name: "histogram buckets",
			expr: `histogram_quantile(0.99, sum by (le) (rate(h_bucket[5m])))`,
			want: []Use{{Metric: "h_bucket", Labels: []string{"le"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, stderr, err := promcheck(t, "-rules", rules("'"+tt.expr+"'"))
			if err != nil {
				t.Fatalf("%v: %s", err, stderr)
			}
			if len(rep.Expressions) != 1 {
				t.Fatalf("%d expressions, want 1", len(rep.Expressions))
			}
			if diff := cmp.Diff(tt.want, rep.Expressions[0].Uses); diff != "" {
				t.Errorf("uses (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPromcheckRefuses: what promcheck reports as a problem.
func TestPromcheckRefuses(t *testing.T) {
	dashboard := func(expr, variable string) string {
		return `{"templating": {"list": [{"name": "pool", "type": "query", "query": ` + variable + `}]},
		  "panels": [{"title": "P", "type": "row", "panels": [{"title": "Q", "targets": [{"refId": "A", "expr": ` + expr + `}]}]}]}`
	}
	tests := []struct {
		name, flag, content, want string
	}{
		{name: "PromQL syntax", flag: "-rules", content: rules("'sum(m'"), want: "unclosed left parenthesis"},
		{name: "unknown field", flag: "-rules", content: rules("m\n        severity: page"), want: "field severity not found"},
		{name: "broken alert template", flag: "-rules", content: rules("m\n        annotations: {summary: '{{ $labels.x '}"), want: "annotation \"summary\""},
		{name: "selector without a metric", flag: "-rules", content: rules(`'{job="x"}'`), want: "names no metric"},
		{name: "empty rule file", flag: "-rules", content: "groups: []\n", want: "no rule groups"},
		{name: "dashboard PromQL in a collapsed row", flag: "-dashboard", content: dashboard(`"rate(m[5m]"`, `"label_values(m, pool)"`), want: `panel "Q", query A`},
		{name: "undefined variable", flag: "-dashboard", content: dashboard(`"m{pool=~\"$pools\"}"`, `"label_values(m, pool)"`), want: "variable $pools is not defined"},
		{name: "label_values without a metric", flag: "-dashboard", content: dashboard(`"m"`, `{"query": "label_values(pool)"}`), want: "is not label_values(selector, label)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, err := promcheck(t, tt.flag, tt.content)
			if err == nil || !strings.Contains(stderr, tt.want) {
				t.Errorf("promcheck: %v, stderr %q; want a failure saying %q", err, stderr, tt.want)
			}
		})
	}

	// Grafana's own variables and the dashboard's are replaced; the query
	// variable's label counts as used.
	rep, stderr, err := promcheck(t, "-dashboard", dashboard(`"sum by (pool) (rate(m{pool=~\"${pool}\"}[$__rate_interval]))"`, `{"query": "label_values(m{kind=\"size\"}, pool)"}`))
	if err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	var got [][]Use
	for _, e := range rep.Expressions {
		got = append(got, e.Uses)
	}
	want := [][]Use{{{Metric: "m", Labels: []string{"kind", "pool"}}}, {{Metric: "m", Labels: []string{"pool"}}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("uses (-want +got):\n%s", diff)
	}
}

// TestPromcheckEvaluates: with -samples, what an alerting rule's
// expression sees of the snapshots: target labels, histograms as a scrape
// stores them, an earlier scrape for counters, a series gone since.
func TestPromcheckEvaluates(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs hack/tools/promcheck; skipped with -short")
	}
	bin, err := controlplane.ModuleTool(t.Context(), controlplane.ToolPromcheck)
	if err != nil {
		t.Fatal(err)
	}
	page := "# TYPE c counter\nc{reason=\"x\"} 5\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 3\nh_sum 4\nh_count 3\n"
	tests := []struct {
		name, expr   string
		now, before  string
		wantFiring   []FiringSample
		wantProblems string
	}{
		{
			name: "target labels", expr: `c{job="agent",instance="lb-1"} > 1`, now: page,
			wantFiring: []FiringSample{{Labels: map[string]string{"__name__": "c", "instance": "lb-1", "job": "agent", "reason": "x"}, Value: 5}},
		},
		{name: "condition false", expr: `c > 5`, now: page},
		{
			name: "histogram", expr: `h_bucket{le="+Inf"} == 3 and on () h_count == 3`, now: page,
			wantFiring: []FiringSample{{Labels: map[string]string{"__name__": "h_bucket", "instance": "lb-1", "job": "agent", "le": "+Inf"}, Value: 3}},
		},
		{name: "a counter without an earlier scrape", expr: `increase(c[10m]) > 0`, now: page},
		{name: "a counter that did not change", expr: `increase(c[10m]) > 0`, now: page, before: page},
		{
			// Prometheus extrapolates the increase of 3 over the minute between the scrapes.
			name: "a counter that grew", expr: `increase(c[10m]) > 0`, now: page, before: strings.Replace(page, "} 5", "} 2", 1),
			wantFiring: []FiringSample{{Labels: map[string]string{"instance": "lb-1", "job": "agent", "reason": "x"}, Value: 4.5}},
		},
		{name: "a series gone since the earlier scrape", expr: `h_sum`, now: "# TYPE c counter\nc{reason=\"x\"} 5\n", before: page},
		{name: "not the text format", expr: `c`, now: "c{ 1\n", wantProblems: "text format parsing error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			rulesFile := filepath.Join(dir, "rules.yaml")
			if err := os.WriteFile(rulesFile, []byte(rules("'"+tt.expr+"'")), 0o644); err != nil {
				t.Fatal(err)
			}
			var before []Target
			if tt.before != "" {
				before = []Target{{Job: "agent", Instance: "lb-1", Page: tt.before}}
			}
			ev, err := EvalAlerts(t.Context(), bin, rulesFile, []Target{{Job: "agent", Instance: "lb-1", Page: tt.now}}, before)
			if tt.wantProblems != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantProblems) {
					t.Fatalf("evaluation: %v; want a failure saying %q", err, tt.wantProblems)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []FiringSample
			for _, f := range ev.Firing {
				got = append(got, f.Samples...)
			}
			if diff := cmp.Diff(tt.wantFiring, got); diff != "" {
				t.Errorf("firing samples (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"A"}, ev.Evaluated); diff != "" {
				t.Errorf("evaluated (-want +got):\n%s", diff)
			}
		})
	}
}

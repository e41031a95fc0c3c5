package manifests

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/groundcloud/groundcloud/test/framework/controlplane"
)

var update = flag.Bool("update", false, "rewrite the values table of charts/groundcloud/README.md")

// The values table of the chart's README sits between these lines.
const (
	valuesBegin = "<!-- values table: generated from values.yaml by test/framework/manifests (go test -run TestChartReadme -update) -->\n"
	valuesEnd   = "<!-- end of values table -->\n"
)

// TestChartReadme: the chart's README lists every value of values.yaml
// with its default and description; -update rewrites the list.
func TestChartReadme(t *testing.T) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	chart := filepath.Join(root, "charts", "groundcloud")
	values, err := os.ReadFile(filepath.Join(chart, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	table, err := ValuesTable(values)
	if err != nil {
		t.Fatal(err)
	}
	readmePath := filepath.Join(chart, "README.md")
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok1 := strings.Cut(string(readme), valuesBegin)
	current, after, ok2 := strings.Cut(rest, valuesEnd)
	if !ok1 || !ok2 {
		t.Fatalf("%s lacks the lines %q and %q around the values table", readmePath, valuesBegin, valuesEnd)
	}
	if *update {
		if err := os.WriteFile(readmePath, []byte(before+valuesBegin+table+valuesEnd+after), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if diff := cmp.Diff(table, current); diff != "" {
		t.Errorf("values table of %s is stale; run go test ./test/framework/manifests -run TestChartReadme -update (-want +got):\n%s", readmePath, diff)
	}
}

func TestValuesTable(t *testing.T) {
	tests := []struct {
		name, values, want, err string
	}{
		{
			name: "documented leaves and maps",
			values: `# A comment that is not a description.
a:
  # -- The port,
  # on two lines.
  port: 80
  # -- Labels | pipes.
  labels: {x: "1"}
  # -- Flags.
  args: []
# -- On or off.
enabled: true
`,
			want: "| a.port | int | `80` | The port, on two lines. |\n" +
				"| a.labels | object | `{\"x\":\"1\"}` | Labels \\| pipes. |\n" +
				"| a.args | list | `[]` | Flags. |\n" +
				"| enabled | bool | `true` | On or off. |\n",
		},
		{name: "undocumented leaf", values: "a:\n  # -- ok\n  b: 1\n  c: x\n", err: "a.c has no \"# --\" description"},
		{name: "plain comment only", values: "# the name\nname: x\n", err: "name has no"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ValuesTable([]byte(tt.values))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("error %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			header := "| Key | Type | Default | Description |\n|-----|------|---------|-------------|\n"
			if diff := cmp.Diff(header+tt.want, got); diff != "" {
				t.Errorf("table (-want +got):\n%s", diff)
			}
		})
	}
}

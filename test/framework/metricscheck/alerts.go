package metricscheck

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/groundcloud/groundcloud/test/framework/controlplane"
)

// AlertTools returns the promcheck binary (built once from
// hack/tools/promcheck) and deploy/monitoring's alerting rules, what
// EvalAlerts takes.
func AlertTools(ctx context.Context) (promcheck, rulesFile string, err error) {
	promcheck, err = controlplane.ModuleTool(ctx, controlplane.ToolPromcheck)
	if err != nil {
		return "", "", err
	}
	root, err := controlplane.RepoRoot()
	if err != nil {
		return "", "", err
	}
	return promcheck, filepath.Join(root, "deploy", "monitoring", "groundcloud.rules.yaml"), nil
}

// Evaluation is promcheck's output with -samples: the alerting rules it
// evaluated and those whose expression returned samples.
type Evaluation struct {
	Evaluated []string `json:"evaluated"`
	Firing    []Firing `json:"firing"`
}

// Firing is one alerting rule whose expression holds, and what it returned.
type Firing struct {
	Alert   string         `json:"alert"`
	Source  string         `json:"source"`
	Samples []FiringSample `json:"samples"`
}

// FiringSample is one sample an alert's expression returned.
type FiringSample struct {
	Labels map[string]string `json:"labels"`
	Value  float64           `json:"value"`
}

// Alerts returns the names of the firing alerts, sorted.
func (e Evaluation) Alerts() []string {
	var names []string
	for _, f := range e.Firing {
		names = append(names, f.Alert)
	}
	slices.Sort(names)
	return names
}

// String lists each firing alert with the samples its expression returned.
func (f Firing) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s):", f.Alert, f.Source)
	for _, s := range f.Samples {
		fmt.Fprintf(&b, " %v = %g;", s.Labels, s.Value)
	}
	return b.String()
}

// ReadEvaluation decodes promcheck's JSON of an evaluation.
func ReadEvaluation(r io.Reader) (Evaluation, error) {
	var ev Evaluation
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ev); err != nil {
		return Evaluation{}, fmt.Errorf("promcheck evaluation: %w", err)
	}
	return ev, nil
}

// Target is one scraped /metrics page and the target labels a scrape adds
// to its series.
type Target struct {
	Job, Instance string
	Page          string
}

// EvalAlerts runs the promcheck binary's evaluation of the alerting rules
// of rulesFile over the pages of now (and of before, the same targets one
// scrape earlier, for expressions over counters). It writes the pages to a
// temporary directory it removes.
func EvalAlerts(ctx context.Context, promcheck, rulesFile string, now, before []Target) (Evaluation, error) {
	dir, err := os.MkdirTemp("", "promcheck-eval-")
	if err != nil {
		return Evaluation{}, fmt.Errorf("evaluate alerts: %w", err)
	}
	defer os.RemoveAll(dir)
	args := []string{"-rules", rulesFile}
	for i, set := range [][]Target{now, before} {
		flag := [...]string{"-samples", "-before"}[i]
		for j, t := range set {
			file := filepath.Join(dir, fmt.Sprintf("%s-%d.txt", flag[1:], j))
			if err := os.WriteFile(file, []byte(t.Page), 0o644); err != nil {
				return Evaluation{}, fmt.Errorf("evaluate alerts: %w", err)
			}
			args = append(args, flag, fmt.Sprintf("job=%s,instance=%s=%s", t.Job, t.Instance, file))
		}
	}
	cmd := exec.CommandContext(ctx, promcheck, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return Evaluation{}, fmt.Errorf("promcheck %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return ReadEvaluation(&stdout)
}

package main

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
)

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

// evalTime is the instant of evaluation; snapshots given with -before lie
// one scrapeInterval earlier.
var evalTime = time.Unix(1_000_000, 0)

const scrapeInterval = time.Minute

// loadSnapshots stores the -before snapshots one scrape interval before
// evalTime and the -samples ones at evalTime. A series of a -before
// snapshot that the later scrape of the same target lacks gets a stale
// marker at evalTime, as a scrape would write.
func loadSnapshots(before, now snapshots) (*memStorage, error) {
	st := newMemStorage()
	t0, t1 := evalTime.Add(-scrapeInterval).UnixMilli(), evalTime.UnixMilli()
	earlier := map[string]labels.Labels{}
	for _, f := range before {
		samples, err := readSnapshot(f)
		if err != nil {
			return nil, err
		}
		for _, s := range samples {
			st.add(s.lset, t0, s.value)
			earlier[s.lset.String()] = s.lset
		}
	}
	for _, f := range now {
		samples, err := readSnapshot(f)
		if err != nil {
			return nil, err
		}
		for _, s := range samples {
			st.add(s.lset, t1, s.value)
			delete(earlier, s.lset.String())
		}
	}
	for _, lset := range earlier {
		st.add(lset, t1, math.Float64frombits(value.StaleNaN))
	}
	return st, nil
}

// evalRules evaluates the expression of every alerting rule of the files at
// evalTime over st, ignoring for: (a caller states whether the condition
// holds, not for how long).
func evalRules(ctx context.Context, files []string, p parser.Parser, st *memStorage) (Evaluation, []error) {
	engine := promql.NewEngine(promql.EngineOpts{
		MaxSamples:    1_000_000,
		Timeout:       time.Minute,
		LookbackDelta: 5 * time.Minute,
		Parser:        p,
	})
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ev := Evaluation{Evaluated: []string{}, Firing: []Firing{}}
	var problems []error
	for _, file := range files {
		groups, errs := rulefmt.ParseFile(file, false, model.UTF8Validation, p, logger)
		if len(errs) > 0 {
			problems = append(problems, errs...)
			continue
		}
		for _, g := range groups.Groups {
			for _, r := range g.Rules {
				if r.Alert == "" {
					continue
				}
				source := fmt.Sprintf("%s: group %s, alert %s", file, g.Name, r.Alert)
				ev.Evaluated = append(ev.Evaluated, r.Alert)
				samples, err := evalExpr(ctx, engine, st, r.Expr)
				if err != nil {
					problems = append(problems, fmt.Errorf("%s: %w", source, err))
					continue
				}
				if len(samples) > 0 {
					ev.Firing = append(ev.Firing, Firing{Alert: r.Alert, Source: source, Samples: samples})
				}
			}
		}
	}
	return ev, problems
}

// evalExpr runs one instant query at evalTime.
func evalExpr(ctx context.Context, engine *promql.Engine, st *memStorage, expr string) ([]FiringSample, error) {
	q, err := engine.NewInstantQuery(ctx, st, nil, expr, evalTime)
	if err != nil {
		return nil, err
	}
	defer q.Close()
	res := q.Exec(ctx)
	if res.Err != nil {
		return nil, res.Err
	}
	vec, err := res.Vector()
	if err != nil {
		return nil, fmt.Errorf("an alerting rule must return a vector: %w", err)
	}
	var out []FiringSample
	for _, s := range vec {
		out = append(out, FiringSample{Labels: s.Metric.Map(), Value: s.F})
	}
	return out, nil
}

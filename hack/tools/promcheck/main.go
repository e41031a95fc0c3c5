// Command promcheck checks groundcloud's Prometheus rule files and Grafana
// dashboards with Prometheus' own parsers, and prints every metric and label
// their PromQL uses, so that a test in the main module can compare them with
// what groundcloud's binaries expose.
//
//	promcheck [-rules FILE]... [-dashboard FILE]...
//	promcheck -rules FILE... -samples LABELS=FILE... [-before LABELS=FILE]...
//
// Rule files are read by rulefmt as Prometheus loads them (unknown fields
// are errors; every expression and alert template must parse). Each query
// of a dashboard (panel targets, nested rows, query variables) must parse
// as PromQL once Grafana's variables are replaced; a variable the dashboard
// does not define is an error.
//
// It prints JSON on stdout: {"expressions": [{"source", "expr", "uses":
// [{"metric", "labels"}]}]}. Every problem goes to stderr, each with its
// file, and the exit status is 1.
//
// With -samples it evaluates instead: each -samples is one /metrics page
// (Prometheus text format) of one target, LABELS being the target labels
// a scrape adds (job=agent,instance=lb-1=agent-lb-1.txt). Every alerting
// rule's expression is evaluated at one instant over all pages, ignoring
// for: (the caller states that a condition holds, not for how long); a
// -before page is the same target's scrape one minute earlier, for
// expressions over counters (increase). It prints JSON: {"evaluated":
// [alert names], "firing": [{"alert", "source", "samples": [{"labels",
// "value"}]}]} with each alert whose expression returned samples. A firing
// alert is no problem of promcheck's: the exit status is 0.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/prometheus/prometheus/promql/parser"
)

// files is a repeatable flag.
type files []string

func (f *files) String() string     { return strings.Join(*f, ",") }
func (f *files) Set(s string) error { *f = append(*f, s); return nil }

// Expression is one PromQL expression and what it uses.
type Expression struct {
	Source string `json:"source"` // file and where in it
	Expr   string `json:"expr"`
	Uses   []Use  `json:"uses"`
}

// Use is one metric an expression selects and the labels it relies on.
type Use struct {
	Metric string   `json:"metric"`
	Labels []string `json:"labels"`
}

// Report is promcheck's output.
type Report struct {
	Expressions []Expression `json:"expressions"`
}

func main() {
	var rules, dashboards files
	var now, before snapshots
	flag.Var(&rules, "rules", "a Prometheus rule file (repeatable)")
	flag.Var(&dashboards, "dashboard", "a Grafana dashboard JSON file (repeatable)")
	flag.Var(&now, "samples", "evaluate alerting rules over this target's /metrics page: LABEL=VALUE[,LABEL=VALUE]...=FILE (repeatable)")
	flag.Var(&before, "before", "the same target's page one scrape earlier, like -samples (repeatable)")
	flag.Parse()
	evaluate := len(now) > 0
	if flag.NArg() > 0 || len(rules)+len(dashboards) == 0 || (evaluate && (len(rules) == 0 || len(dashboards) > 0)) || (!evaluate && len(before) > 0) {
		fmt.Fprintln(os.Stderr, "usage: promcheck [-rules FILE]... [-dashboard FILE]...\n"+
			"       promcheck -rules FILE... -samples LABELS=FILE... [-before LABELS=FILE]...")
		os.Exit(2)
	}
	p := parser.NewParser(parser.Options{})
	if evaluate {
		os.Exit(runEval(rules, now, before, p))
	}
	var report Report
	var problems []error
	for _, f := range rules {
		exprs, errs := checkRules(f, p)
		report.Expressions = append(report.Expressions, exprs...)
		problems = append(problems, errs...)
	}
	for _, f := range dashboards {
		exprs, errs := checkDashboard(f, p)
		report.Expressions = append(report.Expressions, exprs...)
		problems = append(problems, errs...)
	}
	for _, err := range problems {
		fmt.Fprintln(os.Stderr, err)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(report); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
}

// expression parses expr and lists what it uses; source says where it is.
func expression(p parser.Parser, source, expr string) (Expression, error) {
	ast, err := p.ParseExpr(expr)
	if err != nil {
		return Expression{}, fmt.Errorf("%s: %w", source, err)
	}
	uses, err := usesOf(ast)
	if err != nil {
		return Expression{}, fmt.Errorf("%s: %w", source, err)
	}
	return Expression{Source: source, Expr: expr, Uses: uses}, nil
}

// runEval evaluates the alerting rules of files over the snapshots, prints
// the Evaluation and returns the exit status.
func runEval(rules []string, now, before snapshots, p parser.Parser) int {
	st, err := loadSnapshots(before, now)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ev, problems := evalRules(context.Background(), rules, p, st)
	for _, err := range problems {
		fmt.Fprintln(os.Stderr, err)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(ev); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if len(problems) > 0 {
		return 1
	}
	return 0
}

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/prometheus/prometheus/promql/parser"
)

// dashboard is the part of a Grafana dashboard that holds queries.
type dashboard struct {
	Panels     []panel `json:"panels"`
	Templating struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

type panel struct {
	Title   string   `json:"title"`
	Panels  []panel  `json:"panels"` // of a collapsed row
	Targets []target `json:"targets"`
}

type target struct {
	RefID string `json:"refId"`
	Expr  string `json:"expr"`
}

type variable struct {
	Name  string          `json:"name"`
	Type  string          `json:"type"`
	Query json.RawMessage `json:"query"` // a string, or {"query": "..."}
}

// builtins are Grafana's own variables; each stands for a duration.
var builtins = []string{"__rate_interval", "__interval", "__range"}

// variableRef matches $name, ${name}, ${name:format} and [[name]].
var variableRef = regexp.MustCompile(`\$\{(\w+)(?::[^}]*)?\}|\$(\w+)|\[\[(\w+)(?::[^\]]*)?\]\]`)

// labelValues is Grafana's label_values(selector, label) query.
var labelValues = regexp.MustCompile(`^\s*label_values\(\s*(.*?)\s*,\s*(\w+)\s*\)\s*$`)

// checkDashboard lists every PromQL expression of a dashboard: panel
// targets (also in collapsed rows) and query variables.
func checkDashboard(file string, p parser.Parser) ([]Expression, []error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, []error{err}
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, []error{fmt.Errorf("%s: %w", file, err)}
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	var exprs []Expression
	var problems []error
	add := func(e Expression, err error) {
		if err != nil {
			problems = append(problems, err)
			return
		}
		exprs = append(exprs, e)
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		add(variableQuery(p, fmt.Sprintf("%s: variable %s", file, v.Name), v.Query, vars))
	}
	var walk func(panels []panel)
	walk = func(panels []panel) {
		for _, pn := range panels {
			for _, t := range pn.Targets {
				source := fmt.Sprintf("%s: panel %q, query %s", file, pn.Title, t.RefID)
				if strings.TrimSpace(t.Expr) == "" {
					problems = append(problems, fmt.Errorf("%s: no expr", source))
					continue
				}
				add(dashboardExpr(p, source, t.Expr, vars))
			}
			walk(pn.Panels)
		}
	}
	walk(d.Panels)
	if len(exprs)+len(problems) == 0 {
		problems = append(problems, fmt.Errorf("%s: no queries", file))
	}
	return exprs, problems
}

// dashboardExpr checks one query after replacing Grafana's variables.
func dashboardExpr(p parser.Parser, source, expr string, vars map[string]bool) (Expression, error) {
	promql, err := substitute(expr, vars)
	if err != nil {
		return Expression{}, fmt.Errorf("%s: %w", source, err)
	}
	e, err := expression(p, source, promql)
	e.Expr = expr
	return e, err
}

// variableQuery checks a query variable: label_values(selector, label).
func variableQuery(p parser.Parser, source string, raw json.RawMessage, vars map[string]bool) (Expression, error) {
	var q string
	if err := json.Unmarshal(raw, &q); err != nil {
		var obj struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(raw, &obj); err != nil {
			return Expression{}, fmt.Errorf("%s: query is neither a string nor {\"query\": ...}", source)
		}
		q = obj.Query
	}
	m := labelValues.FindStringSubmatch(q)
	if m == nil {
		return Expression{}, fmt.Errorf("%s: %q is not label_values(selector, label)", source, q)
	}
	e, err := dashboardExpr(p, source, m[1], vars)
	if err != nil {
		return Expression{}, err
	}
	e.Expr = q
	for i := range e.Uses {
		if !slices.Contains(e.Uses[i].Labels, m[2]) {
			e.Uses[i].Labels = append(e.Uses[i].Labels, m[2])
			slices.Sort(e.Uses[i].Labels)
		}
	}
	return e, nil
}

// substitute replaces Grafana's built-in variables with a duration and the
// dashboard's own with a regular expression matching anything; any other
// variable is an error.
func substitute(expr string, vars map[string]bool) (string, error) {
	var errs []error
	out := variableRef.ReplaceAllStringFunc(expr, func(ref string) string {
		m := variableRef.FindStringSubmatch(ref)
		name := m[1] + m[2] + m[3]
		switch {
		case slices.Contains(builtins, name):
			return "5m"
		case vars[name]:
			return ".+"
		}
		errs = append(errs, fmt.Errorf("variable %s is not defined by the dashboard", ref))
		return ref
	})
	return out, errors.Join(errs...)
}

package main

import (
	"fmt"
	"maps"
	"slices"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// usesOf lists the metrics an expression selects and, for each, the labels
// the expression relies on it having: those its selector matches, those an
// aggregation groups by or drops, those a binary operation matches on or
// ignores, copies with group_left/group_right or a function reads
// (label_replace, label_join, sort_by_label, and le for
// histogram_quantile). A label the expression itself creates (label_replace,
// label_join, count_values) is not required of any metric. Every selector
// must name its metric.
func usesOf(expr parser.Expr) ([]Use, error) {
	created := createdLabels(expr)
	uses := map[string]map[string]bool{}
	need := func(metrics []string, names ...string) {
		for _, m := range metrics {
			for _, l := range names {
				if !created[l] {
					uses[m][l] = true
				}
			}
		}
	}
	var err error
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		switch n := node.(type) {
		case *parser.VectorSelector:
			name, ok := metricName(n)
			if !ok {
				err = fmt.Errorf("selector %s names no metric", n)
				return err
			}
			if uses[name] == nil {
				uses[name] = map[string]bool{}
			}
			for _, m := range n.LabelMatchers {
				if m.Name != labels.MetricName {
					uses[name][m.Name] = true
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		switch n := node.(type) {
		case *parser.AggregateExpr:
			need(metricsIn(n.Expr), n.Grouping...)
		case *parser.BinaryExpr:
			if vm := n.VectorMatching; vm != nil {
				need(append(metricsIn(n.LHS), metricsIn(n.RHS)...), vm.MatchingLabels...)
				switch vm.Card {
				case parser.CardManyToOne:
					need(metricsIn(n.RHS), vm.Include...)
				case parser.CardOneToMany:
					need(metricsIn(n.LHS), vm.Include...)
				}
			}
		case *parser.Call:
			metrics, names := callLabels(n)
			need(metrics, names...)
		}
		return nil
	})
	var out []Use
	for _, m := range slices.Sorted(maps.Keys(uses)) {
		out = append(out, Use{Metric: m, Labels: slices.Sorted(maps.Keys(uses[m]))})
	}
	return out, nil
}

// callLabels returns the metrics of a function call's vector argument and
// the labels the function reads from them.
func callLabels(c *parser.Call) ([]string, []string) {
	switch c.Func.Name {
	case "label_replace": // (v, dst, replacement, src, regex)
		return metricsIn(c.Args[0]), stringArgs(c.Args[3:4])
	case "label_join": // (v, dst, separator, src...)
		return metricsIn(c.Args[0]), stringArgs(c.Args[3:])
	case "sort_by_label", "sort_by_label_desc": // (v, label...)
		return metricsIn(c.Args[0]), stringArgs(c.Args[1:])
	case "histogram_quantile", "histogram_fraction": // (..., v): classic buckets carry le
		return metricsIn(c.Args[len(c.Args)-1]), []string{"le"}
	}
	return nil, nil
}

// createdLabels are the labels an expression makes itself.
func createdLabels(expr parser.Expr) map[string]bool {
	created := map[string]bool{}
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		switch n := node.(type) {
		case *parser.Call:
			if n.Func.Name == "label_replace" || n.Func.Name == "label_join" {
				for _, l := range stringArgs(n.Args[1:2]) {
					created[l] = true
				}
			}
		case *parser.AggregateExpr:
			if n.Op == parser.COUNT_VALUES {
				for _, l := range stringArgs([]parser.Expr{n.Param}) {
					created[l] = true
				}
			}
		}
		return nil
	})
	return created
}

// metricsIn lists the metrics selected anywhere in node.
func metricsIn(node parser.Node) []string {
	var names []string
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			if name, ok := metricName(vs); ok {
				names = append(names, name)
			}
		}
		return nil
	})
	return names
}

// metricName is a selector's metric: its name, or an equality matcher on
// __name__.
func metricName(vs *parser.VectorSelector) (string, bool) {
	if vs.Name != "" {
		return vs.Name, true
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
			return m.Value, true
		}
	}
	return "", false
}

func stringArgs(args []parser.Expr) []string {
	var out []string
	for _, a := range args {
		for {
			p, ok := a.(*parser.ParenExpr)
			if !ok {
				break
			}
			a = p.Expr
		}
		if s, ok := a.(*parser.StringLiteral); ok {
			out = append(out, s.Val)
		}
	}
	return out
}

package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// checkRules reads a rule file as Prometheus does (strictly: unknown fields
// are errors) and lists each rule's expression.
func checkRules(file string, p parser.Parser) ([]Expression, []error) {
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	groups, errs := rulefmt.ParseFile(file, false, model.UTF8Validation, p, logger)
	if len(errs) > 0 {
		return nil, errs
	}
	var exprs []Expression
	var problems []error
	if len(groups.Groups) == 0 {
		problems = append(problems, fmt.Errorf("%s: no rule groups", file))
	}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			name := "alert " + r.Alert
			if r.Record != "" {
				name = "record " + r.Record
			}
			e, err := expression(p, fmt.Sprintf("%s: group %s, %s", file, g.Name, name), r.Expr)
			if err != nil {
				problems = append(problems, err)
				continue
			}
			exprs = append(exprs, e)
		}
	}
	return exprs, problems
}

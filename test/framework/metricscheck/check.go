package metricscheck

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TargetLabels are the labels Prometheus adds to every series it scrapes;
// expressions may use them of any metric.
var TargetLabels = []string{"instance", "job"}

// Report is promcheck's output.
type Report struct {
	Expressions []Expression `json:"expressions"`
}

// Expression is one PromQL expression and what it uses.
type Expression struct {
	Source string `json:"source"`
	Expr   string `json:"expr"`
	Uses   []Use  `json:"uses"`
}

// Use is one metric an expression selects and the labels it relies on.
type Use struct {
	Metric string   `json:"metric"`
	Labels []string `json:"labels"`
}

// ReadReport decodes promcheck's JSON.
func ReadReport(r io.Reader) (Report, error) {
	var rep Report
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		return Report{}, fmt.Errorf("promcheck report: %w", err)
	}
	return rep, nil
}

// Exposed maps each series name a binary exposes to its label names.
type Exposed map[string][]string

// ParseExposition reads a /metrics page in the Prometheus text format and
// adds its series to e: a histogram X as X_bucket (with le), X_sum and
// X_count; a summary X as X (with quantile), X_sum and X_count.
func (e Exposed) ParseExposition(r io.Reader) error {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return fmt.Errorf("parse /metrics: %w", err)
	}
	for name, f := range families {
		var labels []string
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName())
			}
		}
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			e.add(name+"_bucket", append(slices.Clone(labels), "le"))
			e.add(name+"_sum", labels)
			e.add(name+"_count", labels)
		case dto.MetricType_SUMMARY:
			e.add(name, append(slices.Clone(labels), "quantile"))
			e.add(name+"_sum", labels)
			e.add(name+"_count", labels)
		default:
			e.add(name, labels)
		}
	}
	return nil
}

func (e Exposed) add(name string, labels []string) {
	all := append(e[name], labels...)
	slices.Sort(all)
	e[name] = slices.Compact(all)
}

// Problems lists every metric an expression uses that no binary exposes,
// and every label it relies on that the metric does not carry (beyond
// TargetLabels), each with the expression's source. Expressions that use
// no metric at all are problems too: they watch nothing.
func Problems(rep Report, exposed Exposed) []string {
	var problems []string
	for _, e := range rep.Expressions {
		if len(e.Uses) == 0 {
			problems = append(problems, fmt.Sprintf("%s: uses no metric", e.Source))
		}
		for _, u := range e.Uses {
			labels, ok := exposed[u.Metric]
			if !ok {
				problems = append(problems, fmt.Sprintf("%s: metric %s is exposed by no binary", e.Source, u.Metric))
				continue
			}
			for _, l := range u.Labels {
				if !slices.Contains(labels, l) && !slices.Contains(TargetLabels, l) {
					problems = append(problems, fmt.Sprintf("%s: metric %s has no label %s (it has %s)", e.Source, u.Metric, l, describe(labels)))
				}
			}
		}
	}
	return problems
}

func describe(labels []string) string {
	if len(labels) == 0 {
		return "none"
	}
	return strings.Join(labels, ", ")
}

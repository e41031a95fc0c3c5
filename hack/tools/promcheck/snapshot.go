package main

import (
	"fmt"
	"maps"
	"math"
	"os"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
)

// snapshotFlag is one /metrics page as a scrape reads it: the file and the
// target labels (job, instance) the scrape adds to each of its series.
type snapshotFlag struct {
	target labels.Labels
	file   string
}

// snapshots is a repeatable flag: LABEL=VALUE[,LABEL=VALUE]...=FILE.
type snapshots []snapshotFlag

func (s *snapshots) String() string {
	var parts []string
	for _, f := range *s {
		parts = append(parts, f.target.String()+"="+f.file)
	}
	return strings.Join(parts, " ")
}

func (s *snapshots) Set(v string) error {
	f, err := parseSnapshotFlag(v)
	if err != nil {
		return err
	}
	*s = append(*s, f)
	return nil
}

// parseSnapshotFlag reads LABEL=VALUE[,LABEL=VALUE]...=FILE: the file is
// what follows the last '='.
func parseSnapshotFlag(v string) (snapshotFlag, error) {
	i := strings.LastIndex(v, "=")
	if i <= 0 || i == len(v)-1 {
		return snapshotFlag{}, fmt.Errorf("%q is not LABEL=VALUE[,LABEL=VALUE]...=FILE", v)
	}
	b := labels.NewBuilder(labels.EmptyLabels())
	for _, pair := range strings.Split(v[:i], ",") {
		name, value, ok := strings.Cut(pair, "=")
		if !ok || name == "" || value == "" {
			return snapshotFlag{}, fmt.Errorf("%q: target label %q is not LABEL=VALUE", v, pair)
		}
		b.Set(name, value)
	}
	return snapshotFlag{target: b.Labels(), file: v[i+1:]}, nil
}

// readSnapshot reads f's file in the Prometheus text format and returns
// its samples as a scrape stores them (a histogram X as X_bucket with le,
// X_sum and X_count; a summary X as X with quantile, X_sum and X_count),
// each with the target labels added (a target label wins over an exposed
// one, as with honor_labels false).
func readSnapshot(f snapshotFlag) ([]scraped, error) {
	r, err := os.Open(f.file)
	if err != nil {
		return nil, fmt.Errorf("read snapshot: %w", err)
	}
	defer r.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.file, err)
	}
	var out []scraped
	for name, fam := range families {
		for _, m := range fam.GetMetric() {
			out = append(out, samplesOf(name, fam.GetType(), m)...)
		}
	}
	for i := range out {
		b := labels.NewBuilder(out[i].lset)
		f.target.Range(func(l labels.Label) { b.Set(l.Name, l.Value) })
		out[i].lset = b.Labels()
	}
	return out, nil
}

// scraped is one sample of a snapshot.
type scraped struct {
	lset  labels.Labels
	value float64
}

// samplesOf returns the series one metric of family name stands for.
func samplesOf(name string, typ dto.MetricType, m *dto.Metric) []scraped {
	base := map[string]string{}
	for _, l := range m.GetLabel() {
		base[l.GetName()] = l.GetValue()
	}
	one := func(suffix string, v float64, extra ...string) scraped {
		ls := maps.Clone(base)
		ls[labels.MetricName] = name + suffix
		for i := 0; i+1 < len(extra); i += 2 {
			ls[extra[i]] = extra[i+1]
		}
		return scraped{lset: labels.FromMap(ls), value: v}
	}
	switch typ {
	case dto.MetricType_COUNTER:
		return []scraped{one("", m.GetCounter().GetValue())}
	case dto.MetricType_GAUGE:
		return []scraped{one("", m.GetGauge().GetValue())}
	case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
		h := m.GetHistogram()
		out := []scraped{one("_sum", h.GetSampleSum()), one("_count", float64(h.GetSampleCount()))}
		for _, b := range h.GetBucket() {
			out = append(out, one("_bucket", float64(b.GetCumulativeCount()), "le", formatFloat(b.GetUpperBound())))
		}
		if b := h.GetBucket(); len(b) == 0 || !math.IsInf(b[len(b)-1].GetUpperBound(), 1) {
			out = append(out, one("_bucket", float64(h.GetSampleCount()), "le", "+Inf"))
		}
		return out
	case dto.MetricType_SUMMARY:
		s := m.GetSummary()
		out := []scraped{one("_sum", s.GetSampleSum()), one("_count", float64(s.GetSampleCount()))}
		for _, q := range s.GetQuantile() {
			out = append(out, one("", q.GetValue(), "quantile", formatFloat(q.GetQuantile())))
		}
		return out
	default:
		return []scraped{one("", m.GetUntyped().GetValue())}
	}
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

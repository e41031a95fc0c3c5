package main

import (
	"context"
	"slices"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
)

// memStorage holds a few float series in memory, enough for the PromQL
// engine to evaluate expressions over scraped snapshots; it is a
// storage.Queryable and its own storage.Querier.
type memStorage struct {
	series map[string]*memSeries // by labels.Labels.String()
}

// memSeries is one series and its samples in time order.
type memSeries struct {
	lset    labels.Labels
	samples []chunks.Sample
}

func newMemStorage() *memStorage { return &memStorage{series: map[string]*memSeries{}} }

// add appends a sample at t (milliseconds); samples of one series must be
// added in time order.
func (m *memStorage) add(lset labels.Labels, t int64, v float64) {
	key := lset.String()
	s, ok := m.series[key]
	if !ok {
		s = &memSeries{lset: lset}
		m.series[key] = s
	}
	s.samples = append(s.samples, floatSample{t: t, f: v})
}

func (m *memStorage) Querier(_, _ int64) (storage.Querier, error) { return m, nil }

// Select returns the series every matcher matches, sorted by labels.
func (m *memStorage) Select(_ context.Context, _ bool, _ *storage.SelectHints, matchers ...*labels.Matcher) storage.SeriesSet {
	var out []storage.Series
	for _, s := range m.series {
		if matchAll(s.lset, matchers) {
			out = append(out, storage.NewListSeries(s.lset, s.samples))
		}
	}
	slices.SortFunc(out, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
	return &seriesSet{series: out}
}

func (m *memStorage) LabelValues(_ context.Context, name string, _ *storage.LabelHints, matchers ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	var values []string
	for _, s := range m.series {
		if v := s.lset.Get(name); v != "" && matchAll(s.lset, matchers) {
			values = append(values, v)
		}
	}
	slices.Sort(values)
	return slices.Compact(values), nil, nil
}

func (m *memStorage) LabelNames(_ context.Context, _ *storage.LabelHints, matchers ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	var names []string
	for _, s := range m.series {
		if matchAll(s.lset, matchers) {
			s.lset.Range(func(l labels.Label) { names = append(names, l.Name) })
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil, nil
}

func (m *memStorage) Close() error { return nil }

func matchAll(lset labels.Labels, matchers []*labels.Matcher) bool {
	for _, mt := range matchers {
		if !mt.Matches(lset.Get(mt.Name)) {
			return false
		}
	}
	return true
}

// seriesSet iterates over a slice of series.
type seriesSet struct {
	series []storage.Series
	next   int
}

func (s *seriesSet) Next() bool                        { s.next++; return s.next <= len(s.series) }
func (s *seriesSet) At() storage.Series                { return s.series[s.next-1] }
func (s *seriesSet) Err() error                        { return nil }
func (s *seriesSet) Warnings() annotations.Annotations { return nil }

// floatSample is a chunks.Sample of a float value.
type floatSample struct {
	t int64
	f float64
}

func (s floatSample) T() int64                      { return s.t }
func (s floatSample) ST() int64                     { return 0 }
func (s floatSample) F() float64                    { return s.f }
func (s floatSample) H() *histogram.Histogram       { return nil }
func (s floatSample) FH() *histogram.FloatHistogram { return nil }
func (s floatSample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s floatSample) Copy() chunks.Sample           { return s }

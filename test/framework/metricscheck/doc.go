// Package metricscheck compares what PromQL expressions use (the metrics
// and labels hack/tools/promcheck lists for deploy/monitoring's alerting
// rules and dashboard) with what groundcloud's binaries expose on
// /metrics, so that a rule or panel cannot silently watch a metric or a
// label that does not exist.
//
// It owns: reading promcheck's report and the Prometheus text exposition
// format (with github.com/prometheus/common/expfmt), and the comparison,
// which is pure; its tests also hold promcheck's own (which labels it
// attributes to which metric, what it refuses), since make test runs only
// this module's tests. It must not: scrape or start anything (test/e2e
// does).
package metricscheck

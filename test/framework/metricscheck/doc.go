// Package metricscheck compares what PromQL expressions use (the metrics
// and labels hack/tools/promcheck lists for deploy/monitoring's alerting
// rules and dashboard) with what groundcloud's binaries expose on
// /metrics, so that a rule or panel cannot silently watch a metric or a
// label that does not exist; and it asks promcheck which alerts fire on
// given /metrics pages (EvalAlerts), so that a test can require an alert
// to stay silent on a healthy cluster and to fire on its fault.
//
// It owns: reading promcheck's report and evaluation and the Prometheus
// text exposition format (with github.com/prometheus/common/expfmt), and
// the comparison, which is pure; finding promcheck and the rules
// (AlertTools) and running promcheck
// over pages it is given; and the alerts' fixtures (testdata/alerts: a
// healthy L2, BGP and mixed cluster; each alert's fault as edits of them),
// whose tests enumerate the alerts of the rules file so that an alert
// without a fault fails. Its tests also hold promcheck's own (which labels
// it attributes to which metric, what it refuses, what an evaluation
// sees), since make test runs only this module's tests. It must not:
// scrape or start a cluster or a binary of groundcloud's (test/e2e and
// test/cluster do).
package metricscheck

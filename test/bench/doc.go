// Package bench holds groundcloud's benchmarks: tests that measure rather
// than pass or fail. They run only with GROUNDCLOUD_BENCH=1 (make bench),
// print one machine-readable "BENCH ..." line per scenario and, with
// GROUNDCLOUD_BENCH_DOCS=<file>, rewrite their own section of that file
// (docs/benchmarks.md).
//
// Where each runs: the data-plane (with its traffic-counters variant),
// failover, full-conntrack failover and
// BGP benchmarks on the real cluster (test/framework/realcluster: kubelets,
// kube-proxy, groundcloud from deploy/, Pods of groundcloud-echo; the BGP
// one with FRR as a router, test/framework/frr); the scale benchmark on the
// simulated nodes' sandbox (test/framework/apionly), because it needs 100 nodes.
package bench

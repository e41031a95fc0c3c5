// Package bench holds groundcloud's benchmarks: tests that measure rather
// than pass or fail. They run only with GROUNDCLOUD_BENCH=1 (make bench),
// print one machine-readable "BENCH ..." line per scenario and, with
// GROUNDCLOUD_BENCH_DOCS=<file>, rewrite their own section of that file
// (docs/benchmarks.md).
//
// Where each runs: the data-plane, failover and BGP benchmarks on the real
// cluster (internal/cluster: kubelets, kube-proxy, groundcloud from
// deploy/, Pods of groundcloud-echo; the BGP one with FRR as a router,
// internal/frr); the scale benchmark and the
// full-conntrack failover benchmark on the simulated nodes' sandbox
// (internal/sandbox), the first because it needs 100 nodes, the second
// because it measures the load-balancer hosts' own conntrack tables and
// raises a machine-wide limit under the lock a cluster would hold.
package bench

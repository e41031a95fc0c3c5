// Package bench holds groundcloud's benchmarks: tests that measure rather
// than pass or fail. They run only with GROUNDCLOUD_BENCH=1 (make bench),
// print one machine-readable "BENCH ..." line per scenario and, with
// GROUNDCLOUD_BENCH_DOCS=<file>, rewrite their own section of that file
// (docs/benchmarks.md).
package bench

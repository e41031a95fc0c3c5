// Package async schedules work for loops that have none of their own, as
// Kubernetes keeps its BoundedFrequencyRunner in pkg/util/async.
//
// It owns Runner: when a caller's sync function runs (at start, on
// request with requests coalesced, at least every maxInterval, again after
// a failure), how long it rests after each sync (minInterval, or a
// multiple of the CPU time the sync used), and whether its loop keeps up
// (Stuck, for /healthz). groundcloud-agent runs its data plane syncs
// through it, groundcloud-router its route syncs.
//
// It must not know what a sync does: it never touches the kernel, the
// apiserver or any table, and imports nothing of groundcloud's, so that a
// binary linking it links no data plane (knftables) or other component
// with it. Its only reads of the host are the clock and the process's CPU
// time (getrusage).
package async

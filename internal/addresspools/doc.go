// Package addresspools keeps one cluster-scoped AddressPool object
// (groundcloud.io/v1alpha1) per [Pool] of the cloud-config, so that
// `kubectl get addresspools` shows each pool's ranges and how many of its
// addresses are used, free and orphaned.
//
// desired.go is pure: a Snapshot (the pools, the allocator's usage and
// orphans) -> the objects, and the objects wanted and stored -> the writes.
// reporter.go is the shell: through internal/crdclient (Type) it writes
// only what differs, at most once per interval however often it is woken,
// and deletes the objects of pools gone from the cloud-config. It never
// reads or changes allocations: the load-balancer manager hands it
// snapshots.
package addresspools

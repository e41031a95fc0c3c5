// Package ipam decides which addresses LoadBalancer Services get from the
// address pools of the cloud-config.
//
// It owns:
//   - reading what a Service asks for (RequestFromService): its pool
//     (annotation groundcloud.io/pool), its families (spec.ipFamilies and
//     spec.ipFamilyPolicy), requested addresses (annotation
//     groundcloud.io/load-balancer-ips, else the deprecated
//     spec.loadBalancerIP), its sharing key (annotation
//     groundcloud.io/allow-shared-ip), its forwarding (annotation
//     groundcloud.io/forwarding) and its ports; the annotations' names
//     are internal/annotation's;
//   - the Allocator, which applies the rules below, reports pool usage
//     (for metrics) and orphans, and says which forwarding each Service's
//     addresses are served with and which pool's settings serve them.
//
// It must not do I/O, talk to the apiserver, log, start goroutines or read a
// clock. The durable records are the LoadBalancer objects: the caller
// persists what Assign returns, and after a restart builds a new Allocator
// and feeds it every record with Restore before the first Assign. The
// Allocator is not safe for concurrent use; the caller holds it behind a
// mutex. Everything is deterministic: the same calls give the same results
// (map order never decides anything).
//
// # Rules
//
// Pool. A named pool must exist, allow the Service's namespace and have
// the families required. Requested addresses without a named pool select
// the pool that contains them, auto-assign or not, which must allow the
// namespace; all requested addresses must lie in one pool. Otherwise the
// Service's current pool, and any pool that now contains its addresses,
// come first (stability: held addresses are kept while their pool allows
// the namespace, auto-assign or not), then the auto-assign pools that allow
// the namespace, in config order — with a sharing key, those where the key
// already holds an address of another Service this one may share go first.
// All addresses of a Service come from one pool.
//
// Families. SingleStack wants its one family; RequireDualStack both, or
// fails; PreferDualStack takes a pool that gives both if one does, else a
// pool that gives one (the primary family if possible). A PreferDualStack
// Service that has one family does not move to another pool to gain the
// second; it gains it when its own pool has one free. PreferDualStack asks
// for a second family only when spec.ipFamilies lists two, which the
// apiserver does only in a dual-stack cluster. Addresses are
// returned in the order of the request's families.
//
// Sharing. An address is held by one Service, or by several that all have
// the same non-empty sharing key, no (protocol, port) in common and the
// same forwarding (hosts announce an address, not a port: see
// forwarding.go). Nothing else ever shares. A key is scoped to its
// namespace: a Service joins an address only when every Service holding it
// is of its own namespace, unless the address's pool sets
// allow-cross-namespace-sharing — knowing another namespace's key is not
// enough to add a port to its address. A Service keeps an address it
// holds, whoever shares it, and Restore applies neither the namespace rule
// nor the forwarding one: Services that shared an address across
// namespaces before the rule (or before their pool turned the setting off)
// keep it, and no other Service of another namespace joins them; a pool
// edit that changes the forwarding of some sharers (those that ask for
// none) moves no one either. A sharer that asks for another forwarding
// itself is checked as a Service joining. Messages about an address held
// in another namespace name neither its Services nor their key.
//
// Picking. For each family the Allocator keeps the address the Service
// holds if it still may; else, with a sharing key, takes the lowest address
// of the pool that another Service holds under that key and it may share —
// even over a lower free one, so that Services with one key end up on one
// address, which is what users of allow-shared-ip expect (MetalLB also
// lets auto-assign share); else the lowest free address of the pool,
// searching its ranges in address order. Without a sharing key an
// auto-assigned address is always free. Every address
// of a range is used, the network and broadcast addresses of a CIDR too: a
// range does not record how it was written, a pool's CIDR is usually a part
// of a larger link subnet where those are ordinary hosts, and MetalLB does
// the same by default. To keep them out, write the range as first-last.
// The lowest free address is found with binary searches over the sorted
// held addresses, so a range is never iterated (an IPv6 /64 costs what a
// /28 does).
//
// Changes. Assign re-validates the Service's addresses against its current
// request each time and keeps those that still satisfy it; a changed
// request (ports that now overlap a sharer's, another requested address,
// another pool, another sharing key, other families) may move it. Assign
// is all-or-nothing: when it fails the Service keeps what it had and
// nothing changes.
//
// Pool reloads. SetPools never takes addresses away. An allocation whose
// pool is gone, no longer allows its namespace or no longer contains its
// addresses is an orphan: it is listed by Orphans (OrphanOf asks about one
// Service) with its OrphanCause, and its addresses stay taken (no one else
// gets them); reporting it is the caller's. When its Service is assigned again, a pool
// that now holds its addresses and may serve the request adopts them (a
// renamed pool, say); otherwise Assign keeps the orphan as it is while it
// satisfies the request apart from pool membership, and moves it only when
// the request changes so that it does not. Release frees it. While its pool
// still contains its addresses (it no longer allows the namespace), the
// pool serves it (ServingPool). Once the pool is gone or no longer
// contains them, nothing does: it keeps the forwarding it was served with
// (Terms.Served), and the caller keeps whatever else its pool gave it, so
// that a config edit changes nothing for it until it is resolved.
//
// Restarts. Restore accepts addresses outside every pool (they become
// orphans, served with the forwarding the record says) but refuses a record that collides with one restored before —
// the same address without a matching sharing key, or a port used twice —
// so that an address never has two owners; the caller must resolve the
// refused Service, typically by assigning it anew.
//
// Forwarding. A Service's addresses are served with the forwarding it asks
// for, else with its pool's (passthrough when the pool sets none); a value
// it cannot use counts as none (ServiceForwarding reports it). A pool edit
// changes the forwarding of the Services that ask for none.
//
// Errors wrap the Err* sentinels (check with errors.Is) and name the
// Service, the pool and what to change.
package ipam

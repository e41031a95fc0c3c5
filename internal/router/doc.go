// Package router is groundcloud-router: it programs the Route objects
// (groundcloud.io/v1alpha1, written by the controller manager's route
// controller) into the kernel of the host it runs on, so that pods reach
// each other without an overlay, and reports per Route whether this host
// holds it.
//
// Two placements: on a node it holds a route to every other node's pod
// CIDRs via that node's address; on a gateway (a Linux router in front of
// the nodes) it holds a route to every pod CIDR.
//
// The package owns:
//   - which routes a host should hold (Select) and what to change in the
//     kernel to get there (Diff): pure functions of the Route objects, the
//     placement and the routes the kernel holds;
//   - the kernel shell (NetlinkTable): list, add, replace and delete routes
//     in the main table, marked with a routing protocol number of our own
//     (DefaultProtocol) — the only routes it ever lists, changes or
//     deletes — and watch the main table's changes (Watch), so that a
//     route the kernel dropped with its link comes back when the link
//     does;
//   - the loop (Router) and the per-host status it writes.
//
// It must not:
//   - touch a route whose protocol is not ours, even one to a pod CIDR: it
//     reports the clash instead;
//   - delete anything because the apiserver is unreachable or not yet
//     listed: routes are withdrawn only for Route objects it has seen
//     deleted (the informer's synced view), and stay in the kernel when
//     the router stops, so pods keep talking through a restart;
//   - write Route specs: they belong to the controller manager.
package router

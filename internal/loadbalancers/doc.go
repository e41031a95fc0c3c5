// Package loadbalancers turns LoadBalancer Services into groundcloud.io
// LoadBalancer objects: it assigns addresses with internal/ipam, writes the
// object only when its content changes, and rebuilds the allocator from the
// objects (the durable allocation records) before the first Ensure.
//
// Only Ensure assigns. A reconcile queue refreshes what the allocator holds:
// it writes again an object deleted behind its back (same addresses) and
// rewrites every object's backends when the Nodes that may carry traffic
// change, which the Manager follows in the controller manager's Node cache
// rather than waiting for the service controller.
//
// The pure core: nodes.go (which Nodes are backends, with which addresses:
// one rule that anything holding a Node lister can apply), sourceranges.go
// (a Service's source ranges, failing closed), limits.go and spec.go
// (Service + allocation + backends -> spec). manager.go, write.go,
// reconcile.go and nodeview.go are the shell that talks to the apiserver.
//
// It also reports orphans (addresses kept outside the pools their namespace
// may use, see internal/ipam): a metric, a log line, an AddressOrphaned
// condition on the LoadBalancer (the only part of its status the controller
// manager writes, by server-side apply) and an Event on the Service;
// orphans.go is pure, orphanreport.go talks to the apiserver.
// It never modifies the Service or Node objects it is given.
package loadbalancers

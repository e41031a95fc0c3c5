// Package loadbalancers turns LoadBalancer Services into groundcloud.io
// LoadBalancer objects: it assigns addresses with internal/ipam, writes the
// object only when its content changes, and rebuilds the allocator from the
// objects (the durable allocation records) before the first Ensure.
//
// Only Ensure assigns. A reconcile queue refreshes what the allocator holds:
// it writes again an object deleted behind its back (same addresses),
// whose spec someone else changed, or that a reload of the cloud-config
// changes (a pool's settings, the cluster health check). The objects name no node: the agents
// apply internal/backends to the Nodes themselves, so a node change writes
// nothing here.
//
// The pure core: sourceranges.go (a Service's source ranges, failing
// closed), limits.go and spec.go (Service + allocation -> spec),
// announce.go and forwarding.go (what a pool and the allocator add to it).
// serving.go keeps, for an orphan outside its pool, the spec.announce it
// was served with.
// manager.go, write.go and reconcile.go are the shell that talks to the
// apiserver.
//
// It also reports orphans (addresses kept outside the pools their namespace
// may use, see internal/ipam): a metric, a log line, an AddressOrphaned
// condition on the LoadBalancer (the only part of its status the controller
// manager writes, by server-side apply) and an Event on the Service;
// orphans.go is pure, orphanreport.go talks to the apiserver.
// It never modifies the Service or Node objects it is given.
package loadbalancers

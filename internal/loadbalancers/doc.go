// Package loadbalancers turns LoadBalancer Services into groundcloud.io
// LoadBalancer objects: it assigns addresses with internal/ipam, writes the
// object only when its content changes, and rebuilds the allocator from the
// objects (the durable allocation records) before the first Ensure.
//
// It also reports orphans (addresses kept outside the pools their namespace
// may use, see internal/ipam): a metric, a log line, an AddressOrphaned
// condition on the LoadBalancer (the only part of its status the controller
// manager writes, by server-side apply) and an Event on the Service.
//
// spec.go and orphans.go are pure (Service + Nodes + allocation -> spec;
// orphans + LoadBalancers -> condition writes); manager.go and
// orphanreport.go are the only code here that talks to the apiserver. It
// never modifies the Service or Node objects it is given.
package loadbalancers

// Package loadbalancers turns LoadBalancer Services into groundcloud.io
// LoadBalancer objects: it assigns addresses with internal/ipam, writes the
// object only when its content changes, and rebuilds the allocator from the
// objects (the durable allocation records) before the first Ensure.
//
// spec.go is pure (Service + Nodes + allocation -> spec); manager.go is the
// only code here that talks to the apiserver. It never modifies the Service
// or Node objects it is given.
package loadbalancers

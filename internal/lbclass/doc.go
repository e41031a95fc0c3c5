// Package lbclass serves Services of type LoadBalancer whose
// spec.loadBalancerClass is groundcloud.io/load-balancer (Class). The
// upstream service controller skips every Service with a class, so this
// package holds a small controller of its own that does for those Services
// what upstream's does for Services without one: it adds its finalizer
// (Finalizer) before the first EnsureLoadBalancer, writes
// status.loadBalancer, records the same Events, and on deletion or when
// the Service stops asking for this class calls EnsureLoadBalancerDeleted,
// clears the status and removes the finalizer.
//
// It calls the provider through cloudprovider.LoadBalancer, the same code
// the upstream controller calls, so addresses, objects and backends follow
// one set of rules whichever controller asked. A Service passes from one
// controller to the other only through a type change (the API makes the
// class immutable while the type is LoadBalancer); Handover makes the
// provider refuse to ensure a Service while the other controller's
// finalizer is still on it, so the old owner always releases first.
//
// plan.go is pure; controller.go is the shell that talks to the apiserver.
// It never serves a Service of another class, and never writes to one that
// does not carry its finalizer.
package lbclass

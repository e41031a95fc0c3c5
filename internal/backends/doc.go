// Package backends decides which Nodes are backends of load balancers and
// with which addresses: one pure rule (Of, List) that every component
// holding Nodes applies, so that the controller manager and every agent
// agree on it without the set being written anywhere. It also trims Nodes
// for the caches that only need this rule (Transform).
//
// It does no I/O and holds no state; it must not depend on a LoadBalancer,
// a Service or the cloud-config: the set of backends is the same for every
// load balancer, and a Node's addresses are the ones on the Node, which the
// controller manager's cloud-node controller writes from the inventory.
package backends

// Package nodesim is the data path of a simulated Kubernetes node, for the
// hosts of a lab (package netlab).
//
// The load-balancer scenarios on the path users run (client → VIP →
// kube-proxy → a Pod) are in test/cluster, on real kubelets, kube-proxy and
// Pods (package realcluster): TCP and UDP over IPv4 and IPv6, a node drained
// by kube-proxy's health (also with the apiserver away), Local policy,
// excluded, joining and deleted nodes, requested and shared addresses,
// source ranges, a deleted Service's rules and address removed, a clean
// agent shutdown. nodesim remains for what runs on the apiserver-only test
// bed (package apionly): the controller-manager and agent scenarios of
// test/e2e that assert objects, Events and agent behaviour (TestLoadBalancer:
// requests refused, port conflicts, orphaned addresses, a restarted
// controller manager writing nothing; hand edits, agents whose gossip keys
// differ, agents restarted with other flags); Node API sequences a real
// kubelet does not make on demand (TestNodesJoiningLater's orders of taint,
// providerID, addresses and Ready; TestNodeChangeWritesNoLoadBalancer);
// TestLocalTrafficFromTheStart's clean agent stop and switch from Cluster
// to Local, which count which node answers (a real kube-proxy drops a
// connection on a node without an endpoint, where nodesim answers it and
// names the node; TestCluster checks a new Local Service from its first
// connection, both agents killed at once and the switch from Cluster to
// Local by failures instead). Every benchmark (data plane, failover,
// full-conntrack failover, BGP, scale: its 3 traffic nodes are real
// workers, and its 97 API-only Nodes' addresses are theirs) runs on the
// real cluster, and so do the failover tests: three hosts sharing an L2 pool's addresses (an
// owner's link down and back, the apiserver away) in TestBGP, split brains
// between two hosts (an agent killed and kept dead, gossip cut) in
// TestCluster.
//
// It answers on NodePorts with the node's name and the client's address as
// the node saw it (so tests can tell SNAT from no NAT), and answers health
// checks the way kube-proxy does, both its own /healthz and a Service's
// healthCheckNodePort. test/images/nodesim/groundcloud-nodesim is a thin main over it;
// tests and benchmarks may also run a Server in-process, calling Listen
// from netlab.Host.Do so the sockets live in the host's namespace.
//
// It owns: the protocol the tests rely on (see Server), and health
// controlled through files in a state directory, so that a test in another
// namespace can flip it without network access.
//
// It must not: pick addresses (it listens on every address of both
// families, wherever it is run), open anything but the listeners of its
// Config, or keep running after its context ends.
package nodesim

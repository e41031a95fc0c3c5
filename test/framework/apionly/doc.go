// Package apionly is the API-only test bed: a real etcd and kube-apiserver
// (test/framework/controlplane) with no kubelets, simulated hosts in
// network namespaces (test/framework/netlab) — load-balancer hosts running
// the real groundcloud-agent, nodes whose Node objects it writes itself and
// whose data path is simulated (test/images/nodesim) and client hosts —
// and the real groundcloud-controller-manager.
//
// The end-to-end tests of test/e2e use it for what needs objects, Events
// and agent behaviour rather than real Pods; the real cluster of the
// sandbox, test/cluster and the benchmarks is test/framework/realcluster.
// It shares its topology (netlab.Topology) with that one. It starts
// processes and namespaces and removes them on Close; it changes the root
// network namespace only when Options.RootLink asks for a link into the
// lab.
package apionly

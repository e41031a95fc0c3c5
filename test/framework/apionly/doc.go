// Package sandbox assembles a whole groundcloud installation on one
// machine: a real etcd and kube-apiserver (test/framework/controlplane), simulated
// hosts in network namespaces (test/framework/netlab) — load-balancer hosts running
// the real groundcloud-agent, nodes answering on NodePorts and health ports
// (groundcloud-nodesim) and client hosts — and the real
// groundcloud-controller-manager.
//
// It is the one topology that the end-to-end tests, the one-command sandbox
// (cmd/groundcloud-sandbox) and the benchmarks share. It starts processes
// and namespaces and removes them on Close; it changes the root network
// namespace only when Options.RootLink asks for a link into the lab.
package apionly

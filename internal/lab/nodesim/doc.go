// Package nodesim is the data path of a simulated Kubernetes node, for the
// hosts of a lab (package lab): it answers on NodePorts with the node's name
// and the client's address as the node saw it (so tests can tell SNAT from
// no NAT), and answers health checks the way kube-proxy does, both its own
// /healthz and a Service's healthCheckNodePort. cmd/groundcloud-nodesim is a
// thin main over it; tests and benchmarks may also run a Server in-process,
// calling Listen from lab.Host.Do so the sockets live in the host's
// namespace.
//
// It owns: the protocol the tests rely on (see Server), and health
// controlled through files in a state directory, so that a test in another
// namespace can flip it without network access.
//
// It must not: pick addresses (it listens on every address of both
// families, wherever it is run), open anything but the listeners of its
// Config, or keep running after its context ends.
package nodesim

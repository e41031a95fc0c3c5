// Package controlplane runs a real Kubernetes control plane on loopback: an etcd
// and a kube-apiserver, and when asked kube-controller-manager and
// kube-scheduler, built from the pinned tools module (hack/tools), as child
// processes of the caller. Both test beds start their control planes
// through it: the API-only one (test/framework/apionly) adds simulated
// hosts, the real cluster (test/framework/realcluster) real nodes.
//
// It owns: finding or building the tool binaries (ToolsDir); picking free
// loopback ports; the work directory with its logs, etcd data, serving
// certificate, service-account key, static token file and kubeconfigs; the
// lifetime of the child processes, including stopping and restarting the
// apiserver to simulate an outage. Its apiserver authorizes with the Node
// authorizer and RBAC and admits with NodeRestriction, as a cluster should
// run, so that a node user (system:node:<name> in system:nodes) is held to
// what a kubelet may do.
//
// It must not: bind anything but 127.0.0.1; leave a child process or a temp
// directory behind after Stop (children are in their own process group and
// die with the parent through Pdeathsig); touch the host's kubeconfig or
// kubectl cache; skip when the tools cannot be built (that is a failure for
// the caller to report). It knows nothing of groundcloud's own components:
// the network-namespace hosts, agents and controllers are started elsewhere
// against the ControlPlane it returns. Its core API takes no testing.TB so
// that non-test binaries can use it; StartT is the thin wrapper for tests.
package controlplane

// Package conformance runs Kubernetes' own end-to-end specs for
// LoadBalancer Services — `[sig-network] LoadBalancers` and
// `[sig-network] LoadBalancers ExternalTrafficPolicy: Local` of
// k8s.io/kubernetes/test/e2e/network, at the version the tools module pins —
// against groundcloud on the real cluster (test/framework/realcluster), as
// cloud-provider-kind runs them in its CI.
//
// The suite is the upstream one, unchanged: the tools module builds it as
// one program (hack/tools/cmd/e2e) with agnhost, the image its specs run
// (realcluster.BuildAgnhost, imported into every node under its upstream
// name), in the same go build as the cluster's own binaries. The cluster
// has what every cluster has and the specs use: cluster DNS (CoreDNS). The
// runner is a host of its own on a client network behind a router ("gw"),
// outside the nodes' subnets, as a user outside the cluster is: the
// client-address spec then tells a kept address from a translated one.
//
// A lane is one way of serving the Services (lanes.go): the address
// families of the cluster, the default pool's forwarding (passthrough or
// proxy) and its announcement (L2, or BGP to an FRR router that is the
// runner's gateway). TestLoadBalancers runs the lanes GROUNDCLOUD_LANES
// names (default: the lane of `make test`); `make conformance` runs them
// all. Every spec must pass or be skipped with its reason in skips.txt,
// the one list of what a lane does not run and why.
package conformance

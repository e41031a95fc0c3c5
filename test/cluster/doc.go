// Package clustertest holds the end-to-end tests that run on a real
// cluster (test/framework/realcluster): kubelets and containerd in network-namespace
// nodes, groundcloud installed from deploy/ as Pods, and the check that the
// machine is as before once the cluster is gone.
//
// The tests are skipped with -short and without root; `make test` runs
// them.
package clustertest

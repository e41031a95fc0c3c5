// Package e2e holds groundcloud's end-to-end tests: our real binaries
// against a real kube-apiserver and etcd started by test/framework/controlplane. Every
// check goes through the Kubernetes API or the binaries' own output.
//
// The tests are skipped with -short; `make test` runs them.
package e2e

// Package manifests reads groundcloud's installation manifests (deploy/ and
// the Helm chart charts/groundcloud), applies them to a cluster, and answers
// what they allow: the tests of the manifests and the sandbox use it.
//
// It owns: rendering a kustomization with the real `kubectl kustomize`, and
// a chart with the real `helm template` (Helm.Render; Helm.Install runs
// `helm upgrade --install`), and splitting the result into objects (Render,
// Parse); server-side apply of those objects with strict field validation,
// in an order that installs definitions and identities before what uses
// them (Apply); and the RBAC rules the objects bind to a ServiceAccount
// (Rules).
//
// It must not: change the objects it is given (a test must see what a user
// applies); decide what the manifests should contain (deploy/ and its tests
// do); know about the test bed or start processes other than kubectl and
// helm.
package manifests

// Package crdinstall installs or upgrades all of groundcloud's
// CustomResourceDefinitions (the ones deploy/crds embeds: LoadBalancer,
// Route, AddressPool) by server-side apply, for the controller manager at
// start and for tests.
//
// It must not read or write the custom resources themselves (that is
// internal/crdclient and the packages of each kind), nor be linked by the
// agent or the router: they never install CRDs and need not carry the
// embedded manifests.
package crdinstall

// Package ccm builds the groundcloud-controller-manager command: the
// upstream k8s.io/cloud-provider app and its controllers (cloud-node,
// cloud-node-lifecycle, service, route) with the groundcloud provider
// registered, groundcloud's defaults where upstream's hurt, and
// groundcloud's load-balancer class controller (internal/lbclass), which
// serves the Services upstream's service controller skips.
//
// It reuses the upstream controllers; it must not copy or fork them, and it
// must not mutate upstream package globals.
package ccm

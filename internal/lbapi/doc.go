// Package lbapi binds crdclient's generic client to groundcloud.io/v1alpha1
// LoadBalancer objects: their Type, a Client, a Lister and the informer
// whose cache holds typed objects with their repeating strings shared
// (intern.go), for the agent and the controller manager. It holds no
// policy: callers decide what to write. The CRDs are installed by
// internal/crdinstall.
package lbapi

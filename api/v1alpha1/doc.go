// Package v1alpha1 holds groundcloud's API types in group groundcloud.io,
// version v1alpha1.
//
// LoadBalancer is the single source of truth for the data plane: the
// controller manager writes its spec from a Service, agents program the
// kernel from it and report in its status.
//
// +kubebuilder:object:generate=true
// +groupName=groundcloud.io
package v1alpha1

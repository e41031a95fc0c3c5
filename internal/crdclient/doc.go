// Package crdclient reads and writes groundcloud's custom resources
// (groundcloud.io/v1alpha1, api/v1alpha1) as their Go types over
// client-go's dynamic client: one generic Client, informer (NewInformer)
// and Lister, each given a Type that names the object's Go type, its
// GroupVersionResource and kind, and whether it is namespaced.
//
// It owns the conversion between the dynamic client's unstructured objects
// and the typed ones, and the typed informer cache (Type.Transform).
//
// It must not:
//   - know any one kind: what is particular to a kind (lbapi's interning,
//     a Route's host status entry, the field managers) stays with the
//     package of that kind (internal/lbapi, internal/routeapi,
//     internal/addresspools);
//   - wrap the apiserver's errors or retry: callers say what they were
//     doing and decide what to do;
//   - import client-go's clientset, informer factory or dynamicinformer: the
//     agent and the router link it (see internal/kubecore).
package crdclient

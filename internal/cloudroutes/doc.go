// Package cloudroutes is the controller manager's side of pod routes: the
// provider's cloudprovider.Routes methods over groundcloud.io/v1alpha1
// Route objects (internal/routeapi).
//
// It owns:
//   - what a Route object says for an upstream cloudprovider.Route and back
//     (Build, ToCloud): the next hop chosen from the Node's addresses, and
//     which Routes are reported as blackholes (their machine is gone from
//     the inventory);
//   - the route controller's list, create and delete (Manager).
//
// It must not:
//   - cache Route objects: the route controller lists them every
//     --route-reconciliation-period and must see its own writes, so List
//     reads from the apiserver;
//   - be imported by groundcloud-router: it links k8s.io/cloud-provider, and
//     through it every API group's client.
package cloudroutes

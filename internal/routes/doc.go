// Package routes owns groundcloud's pod-route state in the API: the
// cluster-scoped groundcloud.io/v1alpha1 Route objects, one per node and
// pod CIDR, that the upstream route controller creates and deletes through
// the provider's Routes interface and that routers (internal/router)
// program into kernels.
//
// It owns:
//   - what a Route object says for an upstream cloudprovider.Route and back
//     (translate.go): the object's name, the next hop chosen from the Node's
//     addresses, and which Routes are reported as blackholes (their machine
//     is gone from the inventory);
//   - reading and writing Route objects (Manager for the controller
//     manager; Client, NewInformer and ApplyStatus for routers);
//   - the controller-manager flags that routes need (CheckFlags).
//
// It must not:
//   - touch a kernel: routers do;
//   - decide which routes a host programs: that is the router's placement;
//   - cache Route objects for the controller manager: the route controller
//     lists them every --route-reconciliation-period and must see its own
//     writes, so List reads from the apiserver.
package routes

// Package routeapi owns groundcloud's pod-route state in the API: the
// cluster-scoped groundcloud.io/v1alpha1 Route objects, one per node and
// pod CIDR, that the upstream route controller creates and deletes through
// the provider's Routes interface and that routers (internal/router)
// program into kernels.
//
// It owns:
//   - the object's name (ObjectName), the pod CIDR's canonical form
//     (ParseCIDR) and the next hop chosen from the Node's addresses
//     (NextHop);
//   - reading and writing Route objects (Type, Client over
//     internal/crdclient, NewInformer, and a router's status entry:
//     Client.ApplyHostStatus), for the controller manager and routers;
//   - the controller-manager flags that routes need (CheckFlags).
//
// The controller manager's side, what a Route object says for an upstream
// cloudprovider.Route and back, is internal/cloudroutes: this package links
// neither k8s.io/cloud-provider nor the inventory, so that groundcloud-router,
// which runs on every node, does not link every API group's client through
// them (TestRouterLinksCoreOnly).
//
// It must not:
//   - touch a kernel: routers do;
//   - decide which routes a host programs: that is the router's placement;
//   - cache Route objects for the controller manager: the route controller
//     lists them every --route-reconciliation-period and must see its own
//     writes, so Client.List reads from the apiserver;
//   - import k8s.io/cloud-provider, client-go's clientset or its informer
//     factory (see above).
package routeapi

// Package provider is groundcloud's cloudprovider.Interface: a thin adapter
// that the upstream cloud controllers call. Each method translates its
// arguments and hands off to the package that owns the logic (inventory for
// nodes; load balancers and routes in their own packages). It holds no
// business logic of its own and never modifies the objects it is given.
package provider

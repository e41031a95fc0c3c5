package provider

import (
	"context"
	"time"

	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"

	"github.com/groundcloud/groundcloud/internal/cloudroutes"
)

// routesAdapter adapts cloudroutes.Manager to cloudprovider.Routes. groundcloud
// keeps one cluster's routes in that cluster's apiserver, so clusterName
// is not needed to tell clusters apart and is ignored.
type routesAdapter struct{ c *Cloud }

var _ cloudprovider.Routes = routesAdapter{}

func (r routesAdapter) manager() (*cloudroutes.Manager, error) {
	m := r.c.routes.Load()
	if m == nil {
		return nil, api.NewRetryError("groundcloud routes are starting", time.Second)
	}
	return m, nil
}

// ListRoutes returns every Route object; those whose machine is gone are
// blackholes.
func (r routesAdapter) ListRoutes(ctx context.Context, _ string) ([]*cloudprovider.Route, error) {
	m, err := r.manager()
	if err != nil {
		return nil, err
	}
	return m.List(ctx)
}

// CreateRoute writes the Route object for the route; the name hint (the
// Node's UID) is not used: objects are named after node and CIDR.
func (r routesAdapter) CreateRoute(ctx context.Context, _ string, _ string, route *cloudprovider.Route) error {
	m, err := r.manager()
	if err != nil {
		return err
	}
	return m.Create(ctx, route)
}

// DeleteRoute deletes the route's Route object.
func (r routesAdapter) DeleteRoute(ctx context.Context, _ string, route *cloudprovider.Route) error {
	m, err := r.manager()
	if err != nil {
		return err
	}
	return m.Delete(ctx, route)
}

package cloudroutes

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/groundcloud/groundcloud/internal/config"
	"github.com/groundcloud/groundcloud/internal/inventory"
	"github.com/groundcloud/groundcloud/internal/routeapi"
)

// Manager is the controller manager's side of routes: what the provider's
// cloudprovider.Routes methods do. Its methods are safe for concurrent use
// (the route controller creates routes in parallel).
type Manager struct {
	client *routeapi.Client
	config func() *config.Config
}

// NewManager returns a Manager over a dynamic client; config returns the
// current cloud-config (for the inventory's machine states).
func NewManager(dyn dynamic.Interface, config func() *config.Config) *Manager {
	return &Manager{client: routeapi.NewClient(dyn), config: config}
}

// List returns every Route object as an upstream route; routes to gone
// machines are blackholes (see ToCloud).
func (m *Manager) List(ctx context.Context) ([]*cloudprovider.Route, error) {
	objs, err := m.client.List(ctx)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("list routes: the Route CRD is not installed yet (the controller manager installs it at start): %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("list routes: %w", err)
	}
	cfg := m.config()
	out := make([]*cloudprovider.Route, 0, len(objs))
	for _, obj := range objs {
		out = append(out, ToCloud(obj, machineGone(cfg, obj.Spec.NodeName)))
	}
	return out, nil
}

// Create writes the Route object for r. It is idempotent: an existing
// object with the same spec is success, one with another spec (the Node's
// addresses changed) is updated. A route to a machine that the inventory
// says is gone is refused, as a cloud refuses a route to a deleted instance.
func (m *Manager) Create(ctx context.Context, r *cloudprovider.Route) error {
	if machineGone(m.config(), string(r.TargetNode)) {
		return fmt.Errorf("route %s to node %s: %w", r.DestinationCIDR, r.TargetNode, cloudprovider.InstanceNotFound)
	}
	want, err := Build(r)
	if err != nil {
		return err
	}
	_, err = m.client.Create(ctx, want)
	if err == nil {
		klog.FromContext(ctx).Info("Route created", "route", want.Name, "node", want.Spec.NodeName,
			"destination", want.Spec.DestinationCIDR, "nextHop", want.Spec.NextHop)
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create route %s: %w", want.Name, err)
	}
	have, err := m.client.Get(ctx, "", want.Name)
	if err != nil {
		return fmt.Errorf("read route %s: %w", want.Name, err)
	}
	if equality.Semantic.DeepEqual(have.Spec, want.Spec) {
		return nil
	}
	if have.Spec.NodeName != want.Spec.NodeName || have.Spec.DestinationCIDR != want.Spec.DestinationCIDR {
		return fmt.Errorf("route %s exists for node %s and %s, not for node %s and %s",
			want.Name, have.Spec.NodeName, have.Spec.DestinationCIDR, want.Spec.NodeName, want.Spec.DestinationCIDR)
	}
	have.Spec = want.Spec
	if _, err := m.client.Update(ctx, have); err != nil {
		return fmt.Errorf("update route %s: %w", want.Name, err) // a conflict is retried by the route controller
	}
	klog.FromContext(ctx).Info("Route updated", "route", want.Name, "nextHop", want.Spec.NextHop)
	return nil
}

// Delete deletes the Route object of r (as ListRoutes returned it); one
// that is already gone is success.
func (m *Manager) Delete(ctx context.Context, r *cloudprovider.Route) error {
	name := r.Name
	if name == "" {
		dst, err := routeapi.ParseCIDR(r.DestinationCIDR)
		if err != nil {
			return err
		}
		name = routeapi.ObjectName(string(r.TargetNode), dst)
	}
	err := m.client.Delete(ctx, "", name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete route %s: %w", name, err)
	}
	klog.FromContext(ctx).Info("Route deleted", "route", name, "destination", r.DestinationCIDR, "blackhole", r.Blackhole)
	return nil
}

// machineGone reports whether the inventory says node's machine no longer
// exists (inventory.Exists, by name: a Route knows only the Node's name).
func machineGone(cfg *config.Config, node string) bool {
	if node == "" {
		return false
	}
	return !inventory.Exists(cfg, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}})
}

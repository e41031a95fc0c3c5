package provider

import (
	"context"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/groundcloud/groundcloud/internal/configwatch"
	"github.com/groundcloud/groundcloud/internal/inventory"
)

// instances adapts the inventory to cloudprovider.InstancesV2. Every call
// reads the current configuration, so a reloaded cloud-config applies at once.
type instances struct {
	config *configwatch.Watcher
}

var _ cloudprovider.InstancesV2 = instances{}

// InstanceExists is false only when the inventory says definitively that the
// machine is gone; see inventory.Exists.
func (i instances) InstanceExists(ctx context.Context, node *v1.Node) (bool, error) {
	exists := inventory.Exists(i.config.Current(), node)
	if !exists {
		klog.FromContext(ctx).Info("Machine is gone from the inventory", "node", klog.KObj(node), "providerID", node.Spec.ProviderID)
	}
	return exists, nil
}

// InstanceShutdown is true when the machine's state is shutdown.
func (i instances) InstanceShutdown(_ context.Context, node *v1.Node) (bool, error) {
	return inventory.Shutdown(i.config.Current(), node), nil
}

// InstanceMetadata returns the machine's provider ID, addresses and labels.
func (i instances) InstanceMetadata(_ context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	return inventory.Metadata(i.config.Current(), node)
}

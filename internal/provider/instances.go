package provider

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/groundcloud/groundcloud/internal/bmc"
	"github.com/groundcloud/groundcloud/internal/configwatch"
	"github.com/groundcloud/groundcloud/internal/inventory"
)

// instances adapts the inventory (and the BMCs' power states) to
// cloudprovider.InstancesV2. Every call reads the current configuration, so
// a reloaded cloud-config applies at once.
type instances struct {
	config *configwatch.Watcher
	power  powerStates
	now    func() time.Time
}

// powerStates is what the instances adapter asks of the BMC poller: the
// cached status of a machine's BMC, without waiting for the BMC.
type powerStates interface {
	Status(machine string) (bmc.Status, bool)
}

var _ cloudprovider.InstancesV2 = instances{}

// InstanceExists is false only when the inventory says definitively that the
// machine is gone; see inventory.Exists. A BMC never makes it false: a
// machine whose BMC is unreachable, or says Off, still exists.
func (i instances) InstanceExists(ctx context.Context, node *v1.Node) (bool, error) {
	exists := inventory.Exists(i.config.Current(), node)
	if !exists {
		klog.FromContext(ctx).Info("Machine is gone from the inventory", "node", klog.KObj(node), "providerID", node.Spec.ProviderID)
	}
	return exists, nil
}

// InstanceShutdown is true when the machine's state is shutdown, or when its
// BMC said PowerState Off in its last poll and that answer is fresh (see
// bmc.Status.PoweredOff: no older than three poll intervals). A BMC that
// has not answered, failed its last poll or answered too long ago changes
// nothing, and so does an answer of a BMC the cloud-config has changed
// since. It reads the poller's cache and never waits for a BMC.
func (i instances) InstanceShutdown(_ context.Context, node *v1.Node) (bool, error) {
	cfg := i.config.Current()
	if inventory.Shutdown(cfg, node) {
		return true, nil
	}
	m := inventory.Lookup(cfg, node).Machine
	if m == nil || m.BMC == nil || i.power == nil {
		return false, nil
	}
	s, ok := i.power.Status(m.Name)
	return ok && s.BMC == *m.BMC && s.PoweredOff(i.now()), nil
}

// InstanceMetadata returns the machine's provider ID, addresses and labels.
func (i instances) InstanceMetadata(_ context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	return inventory.Metadata(i.config.Current(), node)
}

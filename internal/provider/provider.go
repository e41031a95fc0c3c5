package provider

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/groundcloud/groundcloud/internal/bmc"
	"github.com/groundcloud/groundcloud/internal/cloudroutes"
	"github.com/groundcloud/groundcloud/internal/config"
	"github.com/groundcloud/groundcloud/internal/configwatch"
	"github.com/groundcloud/groundcloud/internal/inventory"
	"github.com/groundcloud/groundcloud/internal/loadbalancers"
)

// Name is the name under which the provider registers: --cloud-provider=groundcloud.
const Name = inventory.ProviderName

// Options are settings of the provider that come from command-line flags
// rather than from the cloud-config.
type Options struct {
	// ReloadInterval is how often the cloud-config file is checked for changes.
	ReloadInterval time.Duration
}

// Register registers the provider with the upstream cloud-provider library
// under Name. opts is read when the provider is created, after flags are
// parsed. Call it once, before the command runs.
func Register(opts *Options) {
	cloudprovider.RegisterCloudProvider(Name, func(r io.Reader) (cloudprovider.Interface, error) {
		return NewFromReader(r, *opts)
	})
}

// Cloud implements cloudprovider.Interface.
type Cloud struct {
	config *configwatch.Watcher
	power  *bmc.Poller                           // the machines' BMCs, polled from Initialize on
	lbs    atomic.Pointer[loadbalancers.Manager] // set by SetInformers
	routes atomic.Pointer[cloudroutes.Manager]   // set by Initialize

	// Set by Initialize for SetInformers, which the upstream app calls
	// right after it, from the same goroutine.
	ctx    context.Context
	dyn    dynamic.Interface
	events loadbalancers.EventRecorder
}

var (
	_ cloudprovider.Interface    = (*Cloud)(nil)
	_ cloudprovider.InformerUser = (*Cloud)(nil)
)

// NewFromReader builds the provider from the cloud-config given by the
// upstream factory. The reader is the open --cloud-config file; its path is
// kept so that the file can be reloaded when it changes.
func NewFromReader(r io.Reader, opts Options) (*Cloud, error) {
	if r == nil {
		return nil, fmt.Errorf("%s needs a cloud-config: set --cloud-config", Name)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read cloud-config: %w", err)
	}
	path := ""
	if f, ok := r.(*os.File); ok {
		path = f.Name()
	}
	name := path
	if name == "" {
		name = "cloud-config"
	}
	cfg, err := config.Parse(name, data)
	if err != nil {
		return nil, err
	}
	return New(configwatch.New(path, cfg, data, opts.ReloadInterval)), nil
}

// New returns the provider over a configuration source.
func New(w *configwatch.Watcher) *Cloud {
	return &Cloud{config: w, power: bmc.NewPoller(w.Current, bmc.Redfish{})}
}

// Initialize starts reloading the cloud-config and polling the machines'
// BMCs; both stop when stop closes.
// It builds the routes manager, and the client of the load-balancer manager,
// which SetInformers starts.
func (c *Cloud) Initialize(clients cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	configwatch.RegisterMetrics()
	loadbalancers.RegisterMetrics()
	bmc.RegisterMetrics()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-stop
		cancel()
	}()
	go c.config.Run(klog.NewContext(ctx, klog.Background().WithName("cloud-config")))
	go c.power.Run(klog.NewContext(ctx, klog.Background().WithName("bmc")))

	dyn, err := dynamic.NewForConfig(clients.ConfigOrDie(loadbalancers.FieldManager))
	if err != nil {
		klog.Background().Error(err, "Cannot create a client; load balancers are unavailable")
		return
	}
	c.ctx, c.dyn, c.events = ctx, dyn, serviceEvents(ctx, clients)
	c.routes.Store(cloudroutes.NewManager(dyn, c.config.Current))
}

// SetInformers starts the load-balancer manager (CRD installation, the
// LoadBalancer informer, the allocator rebuild, the reconcile queue) over
// the controller manager's shared informers: it reads the same Node and
// Service caches as the upstream controllers. The upstream app calls it
// right after Initialize and starts the factory after every controller;
// until it has been called the load-balancer methods ask to be retried.
func (c *Cloud) SetInformers(f informers.SharedInformerFactory) {
	if c.dyn == nil {
		return // Initialize could not build a client, and said so
	}
	m := loadbalancers.NewManager(c.dyn, c.config.Current, f, c.events)
	c.lbs.Store(m)
	go m.Run(klog.NewContext(c.ctx, klog.Background().WithName("loadbalancers")))
}

// Config returns the cloud-config in force.
func (c *Cloud) Config() *config.Config { return c.config.Current() }

// Power returns the machines' BMC poller, whose cache the out-of-service
// controller reads.
func (c *Cloud) Power() *bmc.Poller { return c.power }

// ProviderName returns Name.
func (c *Cloud) ProviderName() string { return Name }

// HasClusterID is true: groundcloud does not tag resources by cluster ID.
func (c *Cloud) HasClusterID() bool { return true }

// InstancesV2 answers node questions from the inventory in the cloud-config
// and, for shutdown, from the machines' BMCs.
func (c *Cloud) InstancesV2() (cloudprovider.InstancesV2, bool) {
	return instances{config: c.config, power: c.power, now: time.Now}, true
}

// Instances is not supported: InstancesV2 replaces it.
func (c *Cloud) Instances() (cloudprovider.Instances, bool) { return nil, false }

// Zones is not supported: InstancesV2 reports zones and regions.
func (c *Cloud) Zones() (cloudprovider.Zones, bool) { return nil, false }

// Clusters is not supported.
func (c *Cloud) Clusters() (cloudprovider.Clusters, bool) { return nil, false }

// LoadBalancer gives Services of type LoadBalancer addresses from the
// cloud-config's pools and LoadBalancer objects that agents program.
func (c *Cloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return loadBalancer{c}, true }

// Routes is supported when the cloud-config has a [Routes] section
// (docs/routes.md): the route controller then keeps a Route object per
// Node and pod CIDR, which routers program. Without it the route controller
// logs a warning and does not start, so the controller manager runs with or
// without --cluster-cidr. The upstream app asks once, at start.
func (c *Cloud) Routes() (cloudprovider.Routes, bool) {
	if !c.config.Current().Routes.Enabled {
		return nil, false
	}
	klog.Background().Info("Pod routes are enabled by the cloud-config; the route controller needs --cluster-cidr and --configure-cloud-routes=true")
	return routesAdapter{c}, true
}

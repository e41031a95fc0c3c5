package ccm

import (
	"context"
	"maps"

	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	genericcontrollermanager "k8s.io/controller-manager/app"
	"k8s.io/controller-manager/controller"
	"k8s.io/klog/v2"

	"github.com/groundcloud/groundcloud/internal/bmc"
	"github.com/groundcloud/groundcloud/internal/lbclass"
	"github.com/groundcloud/groundcloud/internal/outofservice"
	"github.com/groundcloud/groundcloud/internal/provider"
)

// classClientName is the user agent of the load-balancer class
// controller's client.
const classClientName = "service-lb-class-controller"

// outOfServiceClientName is the user agent of the out-of-service
// controller's client.
const outOfServiceClientName = "bmc-out-of-service-controller"

// Options are groundcloud's flags that choose controllers.
type Options struct {
	// LoadBalancerClassOnly serves only Services of lbclass.Class: the
	// upstream service controller, which serves those without a class, is
	// not started.
	LoadBalancerClassOnly bool
}

// controllerInitializers returns the upstream controllers and the
// load-balancer class controller in a map of our own, so that no change
// touches the upstream global. opts is read when the controllers start,
// after flags are parsed.
func controllerInitializers(opts *Options) map[string]app.ControllerInitFuncConstructor {
	m := maps.Clone(app.DefaultInitFuncConstructors)
	upstream := m[names.ServiceLBController]
	m[names.ServiceLBController] = app.ControllerInitFuncConstructor{
		InitContext: upstream.InitContext,
		Constructor: unlessClassOnly(upstream.Constructor, opts),
	}
	m[outofservice.ControllerName] = app.ControllerInitFuncConstructor{
		InitContext: app.ControllerInitContext{ClientName: outOfServiceClientName},
		Constructor: startOutOfServiceController,
	}
	m[lbclass.ControllerName] = app.ControllerInitFuncConstructor{
		InitContext: app.ControllerInitContext{ClientName: classClientName},
		Constructor: startClassController,
	}
	return m
}

// unlessClassOnly wraps the upstream service controller's constructor: with
// --load-balancer-class-only the controller is not started, so Services
// without a class are left to another load balancer.
func unlessClassOnly(next app.InitFuncConstructor, opts *Options) app.InitFuncConstructor {
	return func(ic app.ControllerInitContext, cfg *config.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
		start := next(ic, cfg, cloud)
		return func(ctx context.Context, cc genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
			if opts.LoadBalancerClassOnly {
				klog.FromContext(ctx).Info("Not starting the service controller: --load-balancer-class-only serves only Services of the class", "class", lbclass.Class)
				return nil, false, nil
			}
			return start(ctx, cc)
		}
	}
}

// startClassController starts internal/lbclass over the provider's load
// balancers and the shared informers, with --concurrent-service-syncs
// workers.
func startClassController(ic app.ControllerInitContext, cfg *config.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
	return func(ctx context.Context, _ genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
		lb, ok := cloud.LoadBalancer()
		if !ok {
			return nil, false, nil
		}
		c := lbclass.New(lb, cfg.ClientBuilder.ClientOrDie(ic.ClientName),
			cfg.SharedInformers.Core().V1().Services(), cfg.SharedInformers.Core().V1().Nodes(),
			cfg.ComponentConfig.KubeCloudShared.ClusterName)
		logger := klog.FromContext(ctx).WithName(lbclass.ControllerName)
		go c.Run(klog.NewContext(ctx, logger), int(cfg.ComponentConfig.ServiceController.ConcurrentServiceSyncs))
		return nil, true, nil
	}
}

// startOutOfServiceController starts internal/outofservice over the shared
// Node informer, the cloud-config and the provider's BMC poller. It always
// runs; machines without bmc-out-of-service = taint are left alone.
func startOutOfServiceController(ic app.ControllerInitContext, cfg *config.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
	return func(ctx context.Context, _ genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
		p, ok := cloud.(*provider.Cloud)
		if !ok {
			return nil, false, nil
		}
		outofservice.RegisterMetrics()
		nodes := cfg.SharedInformers.Core().V1().Nodes()
		c := outofservice.New(cfg.ClientBuilder.ClientOrDie(ic.ClientName), nodes.Lister(), nodes.Informer().HasSynced,
			p.Config, p.Power(), bmc.Redfish{})
		logger := klog.FromContext(ctx).WithName(outofservice.ControllerName)
		go c.Run(klog.NewContext(ctx, logger))
		return nil, true, nil
	}
}

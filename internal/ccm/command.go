package ccm

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/wait"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/klog/v2"

	"github.com/groundcloud/groundcloud/internal/configwatch"
	"github.com/groundcloud/groundcloud/internal/lbclass"
	"github.com/groundcloud/groundcloud/internal/memlimit"
	"github.com/groundcloud/groundcloud/internal/provider"
	"github.com/groundcloud/groundcloud/internal/routeapi"
)

// Defaults where groundcloud differs from upstream; docs/controller-manager.md
// explains each.
const (
	// DefaultConcurrentServiceSyncs replaces upstream's 1, which makes every
	// LoadBalancer Service wait behind every other at start and leader change.
	DefaultConcurrentServiceSyncs = 10
	// DefaultKubeAPIQPS and DefaultKubeAPIBurst replace upstream's 20 and
	// 30: each LoadBalancer Service costs the service controller's client
	// about three writes (its status and two Events) and the provider's one,
	// so at 20/s 1,000 Services created at once waited minutes for their
	// addresses (docs/benchmarks.md, Scale). Each controller has a client and
	// a rate limiter of its own; the apiserver's priority and fairness still
	// protects it.
	DefaultKubeAPIQPS   = 300
	DefaultKubeAPIBurst = 500
	// LeaderElectionResourceName is the Lease the replicas compete for.
	LeaderElectionResourceName = "groundcloud-controller-manager"
)

// NewCommand returns the groundcloud-controller-manager command.
func NewCommand() (*cobra.Command, error) {
	opts, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		return nil, fmt.Errorf("build options: %w", err)
	}
	applyDefaults(opts)

	providerOpts := &provider.Options{ReloadInterval: configwatch.DefaultInterval}
	provider.Register(providerOpts)

	fss := cliflag.NamedFlagSets{}
	fs := fss.FlagSet("groundcloud")
	fs.DurationVar(&providerOpts.ReloadInterval, "cloud-config-reload-interval", providerOpts.ReloadInterval,
		"How often the --cloud-config file is checked for changes. A changed file that parses replaces the inventory and pools without a restart; a broken one is logged and ignored.")
	ccmOpts := &Options{}
	fs.BoolVar(&ccmOpts.LoadBalancerClassOnly, "load-balancer-class-only", false,
		"Serve only LoadBalancer Services with spec.loadBalancerClass: "+lbclass.Class+"; the service controller, which serves Services without a class, is not started. "+
			"For running beside another load balancer while Services move over. Without it both are served.")

	cmd := app.NewCloudControllerManagerCommand(opts, initCloud, controllerInitializers(ccmOpts), names.CCMControllerAliases(), fss, wait.NeverStop)
	cmd.Use = "groundcloud-controller-manager"
	cmd.Long = "groundcloud-controller-manager runs the upstream cloud controllers (cloud-node, cloud-node-lifecycle, service, route) with the groundcloud provider for machines you own, " +
		"and serves LoadBalancer Services of class " + lbclass.Class + "."
	return cmd, nil
}

// applyDefaults sets groundcloud's defaults on freshly built options; flags
// given on the command line still override them.
func applyDefaults(opts *options.CloudControllerManagerOptions) {
	opts.KubeCloudShared.CloudProvider.Name = provider.Name
	opts.ServiceController.ConcurrentServiceSyncs = DefaultConcurrentServiceSyncs
	opts.Generic.ClientConnection.QPS = DefaultKubeAPIQPS
	opts.Generic.ClientConnection.Burst = DefaultKubeAPIBurst
	opts.Generic.LeaderElection.ResourceName = LeaderElectionResourceName
}

// initCloud creates the provider named by --cloud-provider from
// --cloud-config. A broken cloud-config ends the process with every problem
// printed, each with its line.
func initCloud(c *config.CompletedConfig) cloudprovider.Interface {
	memlimit.Apply(klog.Background())
	shared := c.ComponentConfig.KubeCloudShared.CloudProvider
	var cloud cloudprovider.Interface
	var err error
	if shared.CloudConfigFile == "" {
		err = fmt.Errorf("--cloud-config is required: the path of the groundcloud cloud-config file (docs/cloud-config.md)")
	} else if _, statErr := os.Stat(shared.CloudConfigFile); statErr != nil {
		err = fmt.Errorf("--cloud-config: %w", statErr)
	} else {
		cloud, err = cloudprovider.InitCloudProvider(shared.Name, shared.CloudConfigFile)
	}
	if err == nil && cloud == nil {
		err = fmt.Errorf("cloud provider %q is not known; this binary provides %q", shared.Name, provider.Name)
	}
	if err == nil {
		trimInformers(c.SharedInformers)
	}
	if err == nil {
		// Pod routes need flags of the upstream route controller; say so
		// before it fails with a less helpful message.
		_, routesOn := cloud.Routes()
		err = routeapi.CheckFlags(routesOn, routeapi.Flags{
			ConfigureCloudRoutes: c.ComponentConfig.KubeCloudShared.ConfigureCloudRoutes,
			ClusterCIDR:          c.ComponentConfig.KubeCloudShared.ClusterCIDR,
		})
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "groundcloud-controller-manager: cannot start the cloud provider:\n%v\n", err)
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	return cloud
}

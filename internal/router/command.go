package router

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/vishvananda/netlink"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"

	"github.com/groundcloud/groundcloud/internal/kubeconfig"
)

// Options are the router's command-line settings.
type Options struct {
	Kubeconfig       string
	Placement        string
	NodeName         string
	Host             string
	Protocol         int
	MinSync, MaxSync time.Duration
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		Placement: string(PlacementNode),
		Protocol:  DefaultProtocol,
		MinSync:   200 * time.Millisecond,
		MaxSync:   30 * time.Second,
	}
}

// Validate reports every problem at once.
func (o *Options) Validate() error {
	var errs []error
	switch Placement(o.Placement) {
	case PlacementNode:
		if o.NodeName == "" {
			errs = append(errs, errors.New("--node-name is required with --placement=node: the routes to this Node's own pod CIDRs are the node's network plugin's"))
		}
	case PlacementGateway:
	default:
		errs = append(errs, fmt.Errorf("--placement %q: want node or gateway", o.Placement))
	}
	if o.Protocol < 5 || o.Protocol > 255 {
		errs = append(errs, fmt.Errorf("--route-protocol %d: want 5 to 255 (0-4 are the kernel's: unspec, redirect, kernel, boot, static)", o.Protocol))
	}
	if o.MinSync <= 0 || o.MaxSync < o.MinSync {
		errs = append(errs, fmt.Errorf("--min-sync-interval (%s) must be > 0 and <= --max-sync-interval (%s)", o.MinSync, o.MaxSync))
	}
	return errors.Join(errs...)
}

// hostName is --host-name, else the node name, else the machine's name.
func (o *Options) hostName() string {
	if o.Host != "" {
		return o.Host
	}
	if o.NodeName != "" {
		return o.NodeName
	}
	h, _ := os.Hostname()
	return h
}

// NewCommand returns the groundcloud-router command.
func NewCommand() *cobra.Command {
	o := NewOptions()
	logOptions := logs.NewOptions()
	cmd := &cobra.Command{
		Use:   "groundcloud-router",
		Short: "Programs groundcloud pod routes into this host's kernel",
		Long: "groundcloud-router runs on each node (--placement=node) or on a gateway in front of the nodes " +
			"(--placement=gateway). It watches Route objects and keeps a kernel route for each pod CIDR " +
			"to its node's address, marked with its own routing protocol number, so pods reach each other without an overlay.",
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := logsapi.ValidateAndApply(logOptions, nil); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return o.Run(klog.NewContext(ctx, klog.Background().WithValues("host", o.hostName())))
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig of the router's identity; empty means in-cluster")
	fs.StringVar(&o.Placement, "placement", o.Placement, "node: route to every other node's pod CIDRs; gateway: route to every pod CIDR")
	fs.StringVar(&o.NodeName, "node-name", o.NodeName, "this host's Node name (required with --placement=node; its own pod CIDRs are skipped)")
	fs.StringVar(&o.Host, "host-name", o.Host, "this host's name in Route status (default: --node-name, else the machine's host name)")
	fs.IntVar(&o.Protocol, "route-protocol", o.Protocol, "routing protocol number that marks our routes; only routes with it are ever changed or deleted")
	fs.DurationVar(&o.MinSync, "min-sync-interval", o.MinSync, "least time between two syncs")
	fs.DurationVar(&o.MaxSync, "max-sync-interval", o.MaxSync, "most time between two full checks (the kernel's route changes are watched and acted on at once; the full check repairs what the watch missed)")
	logsapi.AddFlags(logOptions, fs)
	return cmd
}

// Run builds the router from the options and runs it until ctx ends.
func (o *Options) Run(ctx context.Context) error {
	cfg, err := o.restConfig()
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	h, err := netlink.NewHandle()
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	defer h.Close()
	if err := checkForwarding(); err != nil {
		klog.FromContext(ctx).Error(err, "Forwarding is off; pods' packets will not be routed")
	}
	return New(Config{
		Host:      o.hostName(),
		Placement: Placement(o.Placement),
		NodeName:  o.NodeName,
		Dynamic:   dyn,
		Table:     NewNetlinkTable(h, o.Protocol),
		MinSync:   o.MinSync,
		MaxSync:   o.MaxSync,
	}).Run(ctx)
}

func (o *Options) restConfig() (*rest.Config, error) {
	return kubeconfig.RESTConfig(o.Kubeconfig, "groundcloud-router")
}

// checkForwarding reports the forwarding sysctls of this namespace that
// are off. It only reads them: turning them on is the host's business.
func checkForwarding() error {
	var errs []error
	for _, key := range []string{"net/ipv4/ip_forward", "net/ipv6/conf/all/forwarding"} {
		b, err := os.ReadFile("/proc/sys/" + key)
		if err != nil {
			errs = append(errs, err)
		} else if strings.TrimSpace(string(b)) != "1" {
			errs = append(errs, fmt.Errorf("%s is %s, must be 1", strings.ReplaceAll(key, "/", "."), strings.TrimSpace(string(b))))
		}
	}
	return errors.Join(errs...)
}

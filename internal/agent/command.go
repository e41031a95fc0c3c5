package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/connrotation"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"sigs.k8s.io/knftables"

	"github.com/groundcloud/groundcloud/internal/backends"
	"github.com/groundcloud/groundcloud/internal/dataplane"
	"github.com/groundcloud/groundcloud/internal/health"
	"github.com/groundcloud/groundcloud/internal/kubeconfig"
	"github.com/groundcloud/groundcloud/internal/kubecore"
	"github.com/groundcloud/groundcloud/internal/layer2"
	"github.com/groundcloud/groundcloud/internal/membership"
	"github.com/groundcloud/groundcloud/internal/memlimit"
)

// Options are the agent's command-line settings.
type Options struct {
	Kubeconfig         string
	Host               string
	Interface          string
	Health             health.Options
	MinSync, MaxSync   time.Duration
	FullSyncEvery      time.Duration
	AnnounceEach       time.Duration
	MetricsBindAddress string
	// KubeAPIQPS and KubeAPIBurst limit the agent's requests to the
	// apiserver (client-go's defaults are 5 and 10).
	KubeAPIQPS   float32
	KubeAPIBurst int
	// Profiling serves net/http/pprof under /debug/pprof/ on the metrics
	// address.
	Profiling bool
	// Ownership is --vip-ownership; Membership configures memberlist.
	Ownership  string
	Membership membership.Options
	// BGP configures the BGP speaker and the host's labels.
	BGP BGPOptions
	// DaemonSet is --daemonset, namespace/name of the DaemonSet that runs
	// this agent: a stop while it still runs the agent on this host is a
	// restart (DaemonSetStop); "": every stop is for good.
	DaemonSet string
	// TrafficCounters is --traffic-counters: node, address or none.
	TrafficCounters string
}

// Default client rate limits: at client-go's 5 per second, reporting the
// status of 1,000 new LoadBalancers took over three minutes.
const (
	DefaultKubeAPIQPS   = 100
	DefaultKubeAPIBurst = 200
)

// NewOptions returns the defaults.
func NewOptions() *Options {
	host, _ := os.Hostname()
	return &Options{
		Host: host,
		Health: health.Options{
			Interval: 2 * time.Second, Timeout: time.Second,
			FailureThreshold: 2, SuccessThreshold: 1,
		},
		MinSync:            100 * time.Millisecond,
		MaxSync:            30 * time.Second,
		FullSyncEvery:      time.Hour,
		AnnounceEach:       10 * time.Second,
		MetricsBindAddress: "127.0.0.1:10263",
		KubeAPIQPS:         DefaultKubeAPIQPS,
		KubeAPIBurst:       DefaultKubeAPIBurst,
		Ownership:          OwnershipAll,
		Membership:         membership.NewOptions(),
		BGP:                BGPOptions{WithdrawWait: 3 * time.Second},
		TrafficCounters:    TrafficCountersAddress,
	}
}

// Validate reports every problem at once.
func (o *Options) Validate() error {
	var errs []error
	if o.Host == "" {
		errs = append(errs, errors.New("--host-name must not be empty"))
	}
	if o.Interface == "" {
		errs = append(errs, errors.New("--interface is required: the interface that faces clients, where virtual IPs are added"))
	}
	if err := o.Health.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.FullSyncEvery < 0 {
		errs = append(errs, fmt.Errorf("--full-sync-interval (%s) must not be negative", o.FullSyncEvery))
	}
	if o.MinSync <= 0 || o.MaxSync < o.MinSync {
		errs = append(errs, fmt.Errorf("--min-sync-interval (%s) must be > 0 and <= --max-sync-interval (%s)", o.MinSync, o.MaxSync))
	}
	if o.KubeAPIQPS <= 0 || o.KubeAPIBurst < 1 {
		errs = append(errs, fmt.Errorf("--kube-api-qps (%v) must be > 0 and --kube-api-burst (%d) >= 1", o.KubeAPIQPS, o.KubeAPIBurst))
	}
	if o.Profiling && o.MetricsBindAddress == "" {
		errs = append(errs, errors.New("--profiling needs --metrics-bind-address: the profiles are served there"))
	}
	if o.AnnounceEach <= 0 {
		errs = append(errs, errors.New("--announce-interval must be > 0"))
	}
	if _, _, err := parseDaemonSet(o.DaemonSet); err != nil {
		errs = append(errs, err)
	}
	if _, err := trafficCounting(o.TrafficCounters); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, o.validateOwnership(), o.BGP.validate())
	return errors.Join(errs...)
}

// NewCommand returns the groundcloud-agent command.
func NewCommand() *cobra.Command {
	o := NewOptions()
	logOptions := logs.NewOptions()
	cmd := &cobra.Command{
		Use:   "groundcloud-agent",
		Short: "Programs groundcloud load balancers on a load-balancer host",
		Long: "groundcloud-agent runs on a load-balancer host: it watches LoadBalancer objects, " +
			"health-checks their nodes, programs nftables, holds virtual IPs and reports status.",
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
			return o.Run(klog.NewContext(ctx, klog.Background().WithValues("host", o.Host)))
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig of the agent's identity; empty means in-cluster")
	fs.StringVar(&o.Host, "host-name", o.Host, "this host's name in LoadBalancer status")
	fs.StringVar(&o.Interface, "interface", o.Interface, "interface facing clients, where virtual IPs are added and announced (required)")
	fs.DurationVar(&o.Health.Interval, "health-interval", o.Health.Interval, "time between health checks of each node")
	fs.DurationVar(&o.Health.Timeout, "health-timeout", o.Health.Timeout, "timeout of one health check")
	fs.IntVar(&o.Health.FailureThreshold, "health-failure-threshold", o.Health.FailureThreshold, "consecutive failures that take a node out")
	fs.IntVar(&o.Health.SuccessThreshold, "health-success-threshold", o.Health.SuccessThreshold, "consecutive successes that bring a node back")
	fs.DurationVar(&o.MinSync, "min-sync-interval", o.MinSync, "least time between two data plane syncs")
	fs.DurationVar(&o.MaxSync, "max-sync-interval", o.MaxSync, "most time between two data plane syncs")
	fs.DurationVar(&o.FullSyncEvery, "full-sync-interval", o.FullSyncEvery, "how often the whole ruleset is rewritten, repairing changes made by hand (other syncs write only what changed); 0: only at start and after a failed sync")
	fs.DurationVar(&o.AnnounceEach, "announce-interval", o.AnnounceEach, "how often held virtual IPs are re-announced (gratuitous ARP, unsolicited NA)")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "address of /metrics and /healthz; empty disables")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "requests per second to the apiserver (mostly LoadBalancer status writes: one per LoadBalancer when its data plane changes)")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "burst of requests to the apiserver")
	fs.BoolVar(&o.Profiling, "profiling", o.Profiling, "serve Go profiles (net/http/pprof) under /debug/pprof/ on --metrics-bind-address")
	fs.StringVar(&o.Ownership, "vip-ownership", o.Ownership, "who holds the virtual IPs: all (this host, the only load-balancer host), memberlist (the agents share them and fail over), none (another program; this agent only forwards)")
	fs.StringVar(&o.TrafficCounters, "traffic-counters", o.TrafficCounters, "nftables counters of the traffic of each virtual IP, read at each scrape of /metrics: address (packets and bytes per virtual IP and port), node (in proxy forwarding also new and current connections per node: a counter per port and node, which makes syncs of thousands of Services on many nodes slow), none")
	o.Membership.AddFlags(fs)
	fs.StringVar(&o.BGP.CloudConfig, "cloud-config", o.BGP.CloudConfig, "the cloud-config file (the controller manager's): its [BGPPeer] sections are the routers this host advertises the addresses of announce = bgp pools to, and with [Routes] (node-routers = true) a Node carries traffic once its groundcloud-router reports its pod routes; empty: no BGP, and Nodes are not waited for. Read once, at start; problems in it are logged and reported, and the agent goes on with the parts it can use (a [BGPPeer] with a problem, or whose password-file it cannot read, is left out)")
	fs.StringVar(&o.BGP.RouterID, "bgp-router-id", o.BGP.RouterID, "BGP identifier of this host, an IPv4 address (default: the first IPv4 address of --interface)")
	fs.DurationVar(&o.BGP.WithdrawWait, "bgp-withdraw-wait", o.BGP.WithdrawWait, "on a stop, how long the host keeps forwarding after withdrawing its routes, while the routers move the traffic away")
	fs.StringVar(&o.BGP.HostLabels, "host-labels", o.BGP.HostLabels, "this host's labels for the pools' and BGP peers' host selectors, key=value,...; empty: the labels of the Node named --host-name")
	fs.StringVar(&o.DaemonSet, "daemonset", o.DaemonSet, "namespace/name of the DaemonSet that runs this agent (deploy/ and the chart set it): a stop while it exists and still selects this host's Node is a restart, and an agent whose addresses no other host takes leaves them and its rules in place for the next one; a stop once it is gone or no longer selects the Node removes them. Empty: every stop removes them")
	logsapi.AddFlags(logOptions, fs)
	return cmd
}

// Run builds the agent from the options and runs it until ctx ends.
func (o *Options) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	memlimit.Apply(logger)
	cfg, err := o.restConfig()
	if err != nil {
		return err
	}
	// Every connection to the apiserver is dialled here, so that all can
	// be closed when the link comes back (Config.Reconnect), as kubelet
	// does when its heartbeat fails.
	dialer := connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
	cfg.Dial = dialer.DialContext
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	core, err := kubecore.New(cfg)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	ip4, err := dataplane.NewNFTables(knftables.IPv4Family)
	if err != nil {
		return err
	}
	ip6, err := dataplane.NewNFTables(knftables.IPv6Family)
	if err != nil {
		logger.Error(err, "IPv6 data plane unavailable; IPv6 virtual IPs will not be forwarded")
		ip6 = nil
	}
	netdev, err := dataplane.NewNFTables(knftables.NetDevFamily)
	if err != nil {
		logger.Error(err, "Netdev data plane unavailable; passthrough services will not be forwarded")
		netdev = nil
	}
	RegisterMetrics()
	health.RegisterMetrics()
	if err := dataplane.CheckHost(); err != nil {
		logger.Error(err, "Host settings the data plane needs are off; forwarding may fail")
	}
	own, err := o.ownership(ctx, core)
	if err != nil {
		return err
	}
	cc, err := o.cloudConfig(ctx, core.Nodes(), own.Events)
	if err != nil {
		return err
	}
	rules := backends.Rules{WaitForPodRoutes: cc != nil && cc.Routes.WaitForNodeRouters()}
	if rules.WaitForPodRoutes {
		logger.Info("A Node carries traffic once groundcloud-router on it reports its pod routes", "condition", backends.ConditionPodRoutes)
	}
	labels, err := o.hostLabels()
	if err != nil {
		return err
	}
	counting, _ := trafficCounting(o.TrafficCounters) // checked by Validate
	syncer := dataplane.NewSyncer(ip4, ip6, netdev, dataplane.NetlinkConntrack{}).BatchBucketElements().CountTraffic(counting)
	if counting != (dataplane.Counting{}) {
		registerTrafficMetrics(syncer.ReadCounters, dataplane.NetlinkConntrack{}.CountConnections)
	}
	a := New(Config{
		Host:          o.Host,
		Dynamic:       dyn,
		Nodes:         core.Nodes(),
		DataPlane:     syncer,
		Addresses:     layer2.NewManager(o.Interface, logger.WithName("vip")),
		Owner:         own.Owner,
		Membership:    own.Membership,
		Events:        own.Events,
		Conntrack:     own.Conntrack,
		Health:        o.Health,
		MinSync:       o.MinSync,
		MaxSync:       o.MaxSync,
		FullSyncEvery: o.FullSyncEvery,
		AnnounceEach:  o.AnnounceEach,
		Interface:     o.Interface,
		Links:         func() ([]netip.Prefix, error) { return LinkPrefixes(o.Interface) },
		HostLabels:    labels,
		Backends:      rules,
		Reconnect:     dialer.CloseAll,
		ForGood:       o.forGood(dyn, core.Nodes()),
		LBHosts:       o.lbHosts(dyn, core.Nodes()),
	})
	speaker, err := o.speaker(ctx, cc, own.Events, a.bgpSessionChanged)
	if err != nil {
		return err
	}
	if speaker != nil {
		a.cfg.Announcer, a.cfg.BGP = speaker, speaker
	}
	if o.MetricsBindAddress != "" {
		if err := serveMetrics(ctx, o.MetricsBindAddress, o.Profiling, a.Stuck, a.Ready); err != nil {
			return err
		}
	}
	return a.Run(ctx)
}

// forGood is Config.ForGood: nil without --daemonset.
func (o *Options) forGood(dyn dynamic.Interface, nodes kubecore.Nodes) func(context.Context) (bool, string) {
	ns, name, _ := parseDaemonSet(o.DaemonSet) // validated
	if name == "" {
		return nil
	}
	return DaemonSetStop{Dynamic: dyn, Nodes: nodes, Namespace: ns, Name: name, Node: o.Host}.ForGood
}

// lbHosts is Config.LBHosts: the nodeSelector of --daemonset; nil
// without --daemonset.
func (o *Options) lbHosts(dyn dynamic.Interface, nodes kubecore.Nodes) func(context.Context) (labels.Selector, error) {
	ns, name, _ := parseDaemonSet(o.DaemonSet) // validated
	if name == "" {
		return nil
	}
	return DaemonSetStop{Dynamic: dyn, Nodes: nodes, Namespace: ns, Name: name, Node: o.Host}.HostSelector
}

func (o *Options) restConfig() (*rest.Config, error) {
	cfg, err := kubeconfig.RESTConfig(o.Kubeconfig, "groundcloud-agent")
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = o.KubeAPIQPS, o.KubeAPIBurst
	return cfg, nil
}

// serveMetrics serves /metrics, /healthz and /readyz on addr, and with
// profiling the Go profiles under /debug/pprof/. /healthz fails (500, with
// the reason) while stuck returns an error, /readyz (503) while ready
// does.
func serveMetrics(ctx context.Context, addr string, profiling bool, stuck, ready func() error) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--metrics-bind-address: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", legacyregistry.Handler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := stuck(); err != nil {
			http.Error(w, "sync loop stuck: "+err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	if profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index) // heap, goroutine, allocs, ... by name
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	return nil
}

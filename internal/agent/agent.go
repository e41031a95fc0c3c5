package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/annotation"
	"github.com/groundcloud/groundcloud/internal/async"
	"github.com/groundcloud/groundcloud/internal/backends"
	"github.com/groundcloud/groundcloud/internal/dataplane"
	"github.com/groundcloud/groundcloud/internal/health"
	"github.com/groundcloud/groundcloud/internal/kubecore"
	"github.com/groundcloud/groundcloud/internal/layer2"
	"github.com/groundcloud/groundcloud/internal/lbapi"
	"github.com/groundcloud/groundcloud/internal/membership"
)

// Owner decides which virtual IPs this host holds. With one agent it holds
// every address (AllAddresses); with several, membership decides (a
// Membership, --vip-ownership=memberlist); NoAddresses leaves them to another
// program.
type Owner interface {
	Owns(addr netip.Addr) bool
}

// AllAddresses is the Owner of a lone agent: it holds every address.
type AllAddresses struct{}

// Owns is always true.
func (AllAddresses) Owns(netip.Addr) bool { return true }

// DataPlane programs forwarding; *dataplane.Syncer implements it. Sync
// fails only when forwarding could not be programmed; a failed clean-up of
// conntrack entries is in its Result.
type DataPlane interface {
	Sync(ctx context.Context, st dataplane.State) (dataplane.Result, error)
	ForceFullSync()
	Cleanup(ctx context.Context) error
}

// Addresses holds virtual IPs on the host; *layer2.Manager implements it.
// Present lists those it owns on the interface, a predecessor's included.
type Addresses interface {
	Set(ctx context.Context, want []netip.Addr) error
	Announce(ctx context.Context)
	Present(ctx context.Context) ([]netip.Addr, error)
	Cleanup(ctx context.Context) error
}

// Config is what an Agent needs; every field is required.
type Config struct {
	Host      string // name in LoadBalancer status
	Dynamic   dynamic.Interface
	Nodes     kubecore.Nodes // whose backends.List every LoadBalancer sends to
	DataPlane DataPlane
	Addresses Addresses
	Owner     Owner
	Health    health.Options
	MinSync   time.Duration // at most one sync per MinSync
	MaxSync   time.Duration // a full check at least every MaxSync
	// FullSyncEvery rewrites the whole ruleset this often, repairing what
	// was changed by hand (partial syncs write only what the state changes);
	// 0: only at start and after a failed sync.
	FullSyncEvery time.Duration
	AnnounceEach  time.Duration // re-announce held addresses this often

	// Membership, when set, shares the addresses with other hosts and is
	// the Owner (Owner may then be nil); see ownership.go.
	Membership Membership
	// Events records split brains and LoadBalancers that only this host's
	// own node could serve (nil: none).
	Events record.EventRecorder
	// Conntrack forgets flows to addresses this host takes over (nil:
	// never); see forgetGained.
	Conntrack Forgetter
	// Interface is where the virtual IPs are announced and passthrough
	// forwarding receives and sends ("": passthrough LoadBalancers are not
	// programmed, and say so).
	Interface string
	// Links returns the prefixes of Interface (see LinkPrefixes; nil: the
	// on-link check is skipped).
	Links func() ([]netip.Prefix, error)
	// Backends are the cluster's choices in which Nodes carry traffic
	// (the zero value: the fixed rules only).
	Backends backends.Rules
	// HostLabels are matched against the pools' host selectors (nil: the
	// labels of the Node named Host, read from the agent's Node informer;
	// until that Node is seen the host matches only pools that select
	// every host).
	HostLabels HostLabels
	// Announcer advertises the addresses of BGP pools (nil: this host
	// announces none; see announce.go). BGP runs it: Run starts it and
	// waits for it to withdraw before removing the data plane.
	Announcer Announcer
	BGP       Runnable
	// ForGood tells a stopping agent whether it stops for good (it is
	// uninstalled, or its host is no longer a load-balancer host) and why;
	// it is asked only when no other host would take some of its
	// addresses, with a bounded context. Then the agent removes its
	// addresses and rules; otherwise it leaves them for the next agent
	// (stop.go). nil: every stop is for good.
	ForGood func(ctx context.Context) (forGood bool, why string)
	// LBHosts reads the selector of the Nodes that are load-balancer
	// hosts: the agent DaemonSet's nodeSelector (a change rolls the
	// agents out anyway, so the first answer is kept). Proxy forwarding
	// gives them no new flows while another node is healthy, so that
	// every host fills the buckets the same way (dataplane.State.LBNodes).
	// Until it has answered (tried again at most every lbHostsRetry),
	// and when nil (an agent without --daemonset), only this host's own
	// Node is left out.
	LBHosts func(ctx context.Context) (labels.Selector, error)
	// Reconnect closes the connections to the apiserver (nil: never).
	// Membership calls it when the interface comes back up: a status write
	// on a connection opened before would wait for TCP to retransmit,
	// seconds after a long outage, and the other hosts would read this
	// host's state (HoldDown) only after it has changed again.
	Reconnect func()
}

// Runnable is something the agent runs beside itself until ctx ends.
type Runnable interface {
	Run(ctx context.Context) error
}

// Agent is one load-balancer host's agent.
type Agent struct {
	ready        readiness       // what /readyz says
	lastLBNodes  []string        // lbNodes' last answer, logged when it changes
	lbHosts      labels.Selector // Config.LBHosts' answer, once it has given one
	lbHostsTried time.Time       // when Config.LBHosts was last asked
	cfg          Config
	client       *lbapi.Client
	informer     cache.SharedIndexInformer
	lister       lbapi.Lister
	nodes        cache.SharedIndexInformer // Nodes, trimmed by backends.Transform
	nodeList     corelisters.NodeLister
	checker      *health.Checker
	runner       *async.Runner

	reannounce     atomic.Bool // announce held addresses after the next sync
	sessions       bgpSessions // this host's established BGP sessions
	retrying       atomic.Bool // a sync to retry a conntrack clean-up is planned
	retryingStatus atomic.Bool // a sync to retry failed status writes is planned
	reports        reportQueue
	looseOnce      sync.Once
	held           map[netip.Addr]bool              // owned after the last sync (at start, the adopted); used by sync only
	adopted        map[netip.Addr]bool              // left by the predecessor, until membership decides (adopts); used by sync only
	heldBefore     heldBefore                       // virtual IPs some host is known to have held; used by sync only
	handOvers      handOvers                        // who held each address before this host; used by sync only
	handOverTimer  *time.Timer                      // a sync when a hand-over ends; used by sync only
	owned          atomic.Pointer[[]netip.Addr]     // held on the interface after the last sync, for a stop
	advertised     atomic.Pointer[advertisedRoutes] // the routes given the announcer in the last sync, for a stop
	ownOnly        map[string]bool                  // LoadBalancers warned about as OwnNodeOnly; used by sync only
	served         map[string]bool                  // LoadBalancers that have had a healthy backend; used by sync only
	neverWarned    map[string]bool                  // LoadBalancers warned about as NoHealthyBackend; used by sync only
	offLink        map[string]string                // off-link backends warned about, by LoadBalancer; used by sync only
	bgpOnLink      map[string]string                // BGP proxy addresses on the link warned about, by LoadBalancer; used by sync only
	groupsLeftOut  int                              // host groups beyond membership.MaxGroups warned about; used by sync only
	metrics        syncMetrics                      // used by sync only
	// translations keeps what each LoadBalancer object translates to;
	// used by sync only.
	translations *translateMemo
}

// New builds an agent; it starts nothing.
func New(cfg Config) *Agent {
	if cfg.Membership != nil && cfg.Owner == nil {
		cfg.Owner = cfg.Membership
	}
	a := &Agent{cfg: cfg, client: lbapi.NewClient(cfg.Dynamic), reports: newReportQueue(), translations: &translateMemo{}}
	a.informer = lbapi.NewInformer(cfg.Dynamic, 0)
	a.lister = lbapi.NewLister(a.informer)
	if cfg.Nodes != nil {
		a.nodes = kubecore.NodeInformer(cfg.Nodes, backends.Transform)
		a.nodeList = corelisters.NewNodeLister(a.nodes.GetIndexer())
	}
	a.runner = async.NewRunner(a.sync, cfg.MinSync, cfg.MaxSync)
	a.checker = health.NewChecker(cfg.Health, a.runner.Request)
	return a
}

// Run serves until ctx ends. Then it hands its addresses over to the
// hosts that take them and removes its rules and addresses, or, when some
// address has no other host and the agent does not stop for good
// (Config.ForGood), leaves them in place for the next agent, which adopts
// them (stop.go).
func (a *Agent) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	if a.nodes == nil {
		return errors.New("agent: no client for the Node informer (Config.Nodes)")
	}
	if _, err := a.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { a.runner.Request() },
		UpdateFunc: func(old, cur any) { a.onUpdate(old, cur) },
		DeleteFunc: func(any) { a.runner.Request() },
	}); err != nil {
		return err
	}
	if _, err := a.nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { a.onNode(obj) },
		UpdateFunc: func(old, cur any) { a.onNodeUpdate(old, cur) },
		DeleteFunc: func(obj any) { a.onNode(obj) },
	}); err != nil {
		return err
	}
	a.adoptPresent(ctx)
	// The loops end when the deferred stop says so, not with ctx: what
	// the agent leaves behind is decided first (planStopNow), while it is
	// still in the gossip and its speaker still has its sessions.
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	defer func() {
		plan := a.planStopNow(logger) // before this host leaves the gossip
		a.keepRoutes(logger, plan)
		a.handOver(logger, plan)
		stop()
		wg.Wait()
		a.finish(logger, plan)
	}()
	wg.Go(func() { a.informer.RunWithContext(runCtx) })
	wg.Go(func() { a.nodes.RunWithContext(runCtx) })
	logger.Info("Waiting for LoadBalancers and Nodes")
	if !cache.WaitForCacheSync(ctx.Done(), a.informer.HasSynced, a.nodes.HasSynced) {
		return ctx.Err()
	}
	if a.cfg.BGP != nil {
		if a.advertisedBefore() {
			a.ready.expectBGP(time.Now())
		}
		a.restartRoutes(logger)
		wg.Go(func() {
			if err := a.cfg.BGP.Run(runCtx); err != nil {
				logger.Error(err, "BGP speaker failed; this host advertises no route")
			}
			a.sessions.reset() // its sessions are gone: the others advertise
			a.runner.Request()
		})
	}
	wg.Go(func() { a.checker.Run(runCtx) })
	wg.Go(func() { a.runner.Run(runCtx) })
	wg.Go(func() { every(runCtx, a.cfg.AnnounceEach, func() { a.cfg.Addresses.Announce(runCtx) }) })
	if a.cfg.FullSyncEvery > 0 {
		// As kube-proxy's nftables mode: partial syncs diff the state
		// against what the agent applied, so only a full one sees a rule
		// or element changed by hand.
		wg.Go(func() {
			every(runCtx, a.cfg.FullSyncEvery, func() {
				a.cfg.DataPlane.ForceFullSync()
				a.runner.Request()
			})
		})
	}
	wg.Go(func() { a.reportLoop(runCtx) })
	membershipErr := make(chan error, 1)
	if a.cfg.Membership != nil {
		wg.Go(func() { membershipErr <- a.cfg.Membership.Run(runCtx, a.membershipHooks(runCtx)) })
	}
	a.runner.Request()
	logger.Info("Agent running", "host", a.cfg.Host)
	select {
	case <-ctx.Done():
		return nil
	case err := <-membershipErr:
		if err != nil {
			return fmt.Errorf("membership: %w", err)
		}
		<-ctx.Done()
		return nil
	}
}

// onUpdate ignores changes that leave the spec alone: status writes (ours
// among them) and resyncs. The spec's generation changes with every spec
// change. Another host publishing a new Member condition is a change for
// membership (see hostsChanged).
func (a *Agent) onUpdate(old, cur any) {
	o, ok1 := old.(metav1.Object)
	c, ok2 := cur.(metav1.Object)
	if ok1 && ok2 && o.GetGeneration() == c.GetGeneration() && !a.hostsChanged(old, cur) {
		return
	}
	a.runner.Request()
}

// onNode syncs when a Node that comes or goes is a backend: a node
// registering (tainted until the cloud-node controller initialises it) or
// an excluded one changes no load balancer, and a sync costs every
// LoadBalancer's translation.
func (a *Agent) onNode(obj any) {
	if isBackend(a.cfg.Backends, obj) || a.isOwnNode(obj) {
		a.runner.Request()
	}
}

// isOwnNode reports whether obj, a Node or the tombstone of one, is this
// host's, whose labels the pools' host selectors match (Config.HostLabels
// nil).
func (a *Agent) isOwnNode(obj any) bool {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	n, ok := obj.(*corev1.Node)
	return ok && a.cfg.HostLabels == nil && n.Name == a.cfg.Host
}

// isBackend reports whether obj, a Node or the tombstone of one, is a
// backend by rules; anything else counts as one.
func isBackend(rules backends.Rules, obj any) bool {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	n, ok := obj.(*corev1.Node)
	if !ok {
		return true
	}
	_, is := rules.Of(n)
	return is
}

// onNodeUpdate syncs when a Node's update changes whether or with which
// addresses it is a backend (backends.Same), or changes this host's own
// labels; kubelet's status reports and other nodes' label or annotation
// changes do not.
func (a *Agent) onNodeUpdate(old, cur any) {
	o, ok1 := old.(*corev1.Node)
	c, ok2 := cur.(*corev1.Node)
	if !ok1 || !ok2 {
		a.runner.Request()
		return
	}
	if a.isOwnNode(c) && !maps.Equal(o.Labels, c.Labels) {
		klog.Background().Info("Host labels changed", "node", c.Name, "labels", labels.Set(c.Labels).String())
		a.runner.Request()
		return
	}
	if c.Name == a.cfg.Host && o.Spec.Unschedulable != c.Spec.Unschedulable {
		klog.Background().Info("This host's Node changed schedulability: a cordoned host hands its addresses to the others", "node", c.Name, "unschedulable", c.Spec.Unschedulable)
		a.runner.Request()
		return
	}
	if !a.cfg.Backends.Same(o, c) {
		a.runner.Request()
	}
}

// every calls f each d until ctx ends (not at once).
func every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}

// sync is one pass: translate the cached objects, probe new health check
// targets, program the data plane, hold the owned addresses, report status.
func (a *Agent) sync(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	began := time.Now()
	lbs, err := a.lister.List()
	if err != nil {
		return err
	}
	nodes, err := a.nodeBackends(ctx)
	if err != nil {
		return err
	}
	plan := a.plan(ctx, lbs, nodes)
	a.noteNeverHealthy(lbs, &plan)
	an := announceOf(lbs, a.labels())
	plan.State.HandOver = a.handOverFrom(an, plan.VIPs)

	start := time.Now()
	res, syncErr := a.cfg.DataPlane.Sync(ctx, plan.State)
	programmed := time.Now()
	syncDuration.Observe(programmed.Sub(start).Seconds())
	if syncErr != nil {
		syncFailures.Inc()
		logger.Error(syncErr, "Data plane sync failed; the next one is full")
		a.cfg.DataPlane.ForceFullSync()
	}
	if res.CleanupErr != nil {
		a.cleanupFailed(ctx, res.CleanupErr)
	}

	if a.cfg.Membership != nil {
		a.cfg.Membership.Observe(a.observation(lbs, plan, syncErr))
		if syncErr == nil && a.cfg.Conntrack != nil { // a failover can bring this host connections
			a.looseOnce.Do(func() { checkLoosePickup(logger) })
		}
	}
	an.bgp = onlyServed(an.bgp, plan.State)
	var owned []netip.Addr
	for _, vip := range plan.VIPs {
		if an.l2[vip] && !an.bgpAddrs[vip] && (a.cfg.Owner.Owns(vip) || a.adopts(vip)) {
			owned = append(owned, vip)
		}
	}
	routes := a.routes(an, syncErr == nil && a.nodesReachable(plan))
	a.forgetGained(ctx, append(slices.Clone(owned), an.held(routes)...), passthroughOnly(plan.State))
	announced := a.advertise(routes)
	a.ready.note(syncErr == nil, len(announced) > 0 && len(a.sessions.families()) > 0)
	a.advertised.Store(&advertisedRoutes{all: routeAddrs(routes), elected: an.held(routes)})
	addrStart := time.Now()
	a.quiet(owned)
	addrErr := a.cfg.Addresses.Set(ctx, owned)
	a.keepOwned(owned)
	if addrErr != nil {
		logger.Error(addrErr, "Cannot set virtual IPs")
	}
	logger.V(2).Info("Synced", "plan", start.Sub(began), "dataPlane", programmed.Sub(start),
		"addresses", time.Since(addrStart), "elapsed", time.Since(began))
	_, elsewhere := a.cfg.Owner.(NoAddresses)
	a.metrics.record(plan.State, an.toHold(plan.VIPs), len(owned), !elsewhere, syncErr, addrErr)
	if a.reannounce.Swap(false) {
		a.cfg.Addresses.Announce(ctx)
	}
	a.reports.put(statusReport{lbs: lbs, owned: owned, announced: announced, err: errors.Join(syncErr, addrErr), problems: plan.Problems})
	a.warnOwnNodeOnly(lbs, plan.Problems)
	a.warnOffLink(lbs, plan.Problems)
	a.warnBGPOnLink(ctx, lbs, plan.State.Links)
	return errors.Join(syncErr, addrErr)
}

// bgpProxy reports whether lb's addresses are advertised over BGP and
// forwarded by proxy.
func bgpProxy(lb *v1alpha1.LoadBalancer) bool {
	an := lb.Spec.Announce
	return an != nil && an.Mode == v1alpha1.AnnounceBGP && lb.Spec.Forwarding == v1alpha1.ForwardingProxy
}

// warnBGPOnLink logs and records a Warning Event when the addresses of a
// LoadBalancer advertised over BGP with proxy forwarding that lie in a
// subnet of this host's interface change to a non-empty list. Proxy
// forwarding SNATs each flow to its address, so the nodes' replies go to
// the address: a node on the address's own subnet looks for it with ARP
// or NDP, which no host answers for a BGP address, and the replies are
// lost (docs/bgp.md: nodes must route the pool's addresses to the
// router).
func (a *Agent) warnBGPOnLink(ctx context.Context, lbs []*v1alpha1.LoadBalancer, links []netip.Prefix) {
	now := map[string]string{}
	for _, lb := range lbs {
		if !bgpProxy(lb) {
			continue
		}
		var on []string
		for _, v := range usableAddrs(lb) {
			for _, p := range links {
				if p.Contains(v) {
					on = append(on, v.String()+" (in "+p.String()+")")
					break
				}
			}
		}
		if len(on) == 0 {
			continue
		}
		name := lb.Namespace + "/" + lb.Name
		list := strings.Join(on, ", ")
		now[name] = list
		if a.bgpOnLink[name] == list {
			continue
		}
		msg := fmt.Sprintf("Address %s of this BGP LoadBalancer with proxy forwarding lies in a subnet of load-balancer host %s's interface %s: "+
			"nodes on that link look for it with ARP or NDP, which no host answers for an address advertised over BGP, so the replies of its flows are lost. "+
			"Give the pool addresses outside the nodes' subnets (the nodes route them to the router), or use passthrough forwarding (annotation %s: passthrough).",
			list, a.cfg.Host, a.cfg.Interface, annotation.Forwarding)
		klog.FromContext(ctx).Error(nil, "A BGP address with proxy forwarding lies in the interface's subnet; its flows' replies will be lost", "loadBalancer", klog.KObj(lb), "addresses", list)
		if a.cfg.Events != nil {
			a.cfg.Events.Eventf(eventTarget(lb), corev1.EventTypeWarning, ReasonBGPAddressOnLink, "%s", msg)
		}
	}
	a.bgpOnLink = now
}

// warnOffLink records a Warning Event when the backends of a passthrough
// LoadBalancer that this host cannot reach on a shared link change to a
// non-empty list, and sets the metric of them.
func (a *Agent) warnOffLink(lbs []*v1alpha1.LoadBalancer, problems map[string]Problems) {
	now := map[string]string{}
	for _, lb := range lbs {
		name := lb.Namespace + "/" + lb.Name
		nodes := problems[name].OffLink
		if len(nodes) == 0 {
			continue
		}
		list := strings.Join(nodes, ", ")
		now[name] = list
		if a.offLink[name] != list && a.cfg.Events != nil {
			a.cfg.Events.Eventf(eventTarget(lb), corev1.EventTypeWarning, ReasonNodeNotOnLink,
				"Load-balancer host %s shares no link with node(s) %s, which passthrough forwarding needs: they get none of this Service's flows. "+
					"Put them on the host's subnet, or use proxy forwarding (annotation %s: proxy).", a.cfg.Host, list, annotation.Forwarding)
		}
	}
	recordOffLink(a.offLink, now)
	a.offLink = now
}

// warnOwnNodeOnly records a Warning Event when a LoadBalancer's only
// healthy backend becomes this host's own node (Problems.OwnNodeOnly).
func (a *Agent) warnOwnNodeOnly(lbs []*v1alpha1.LoadBalancer, problems map[string]Problems) {
	now := map[string]bool{}
	for _, lb := range lbs {
		name := lb.Namespace + "/" + lb.Name
		if !problems[name].OwnNodeOnly {
			continue
		}
		now[name] = true
		if !a.ownOnly[name] && a.cfg.Events != nil {
			a.cfg.Events.Eventf(eventTarget(lb), corev1.EventTypeWarning, ReasonOwnNodeOnly,
				"The only healthy backend is %s, the load-balancer host itself, which proxy forwarding cannot reach through its own NodePort: "+
					"its connections fail until another node is healthy. Add a node, or use passthrough forwarding.", a.cfg.Host)
		}
	}
	a.ownOnly = now
}

// host is what Translate needs of this host, its links read now when
// some LoadBalancer of lbs forwards in passthrough, the only forwarding
// that checks them, or is a BGP one with proxy forwarding (warnBGPOnLink)
// (reading them lists every address of the interface, the virtual IPs
// among them). When they cannot be read the on-link check
// is skipped (logged): the last known good list would be no better than
// the kernel's own neighbour errors.
func (a *Agent) host(ctx context.Context, lbs []*v1alpha1.LoadBalancer) Host {
	h := Host{Node: a.cfg.Host, Interface: a.cfg.Interface, LBNodes: a.lbNodes(ctx)}
	passthrough := slices.ContainsFunc(lbs, func(lb *v1alpha1.LoadBalancer) bool {
		return lb.Spec.Forwarding == v1alpha1.ForwardingPassthrough || bgpProxy(lb)
	})
	if a.cfg.Links != nil && passthrough {
		links, err := a.cfg.Links()
		if err != nil {
			klog.FromContext(ctx).Error(err, "Cannot read the interface's prefixes; passthrough backends are not checked for being on-link", "interface", a.cfg.Interface)
		}
		h.Links = links
	}
	return h
}

// lbHostsRetry is how soon a failed read of the load-balancer hosts'
// selector is tried again.
const lbHostsRetry = 5 * time.Second

// lbNodes are the Nodes that Config.LBHosts selects, sorted; nil without
// it or while it has not answered.
func (a *Agent) lbNodes(ctx context.Context) []string {
	if a.cfg.LBHosts == nil || a.nodeList == nil {
		return nil
	}
	if a.lbHosts == nil && time.Since(a.lbHostsTried) >= lbHostsRetry {
		a.lbHostsTried = time.Now()
		cctx, cancel := context.WithTimeout(ctx, stopTimeout)
		sel, err := a.cfg.LBHosts(cctx)
		cancel()
		if err != nil {
			klog.FromContext(ctx).Error(err, "Cannot tell the load-balancer hosts' Nodes yet; proxy forwarding leaves out only this host's own Node meanwhile, and a flow may change node when its address moves", "retryIn", lbHostsRetry)
		}
		a.lbHosts = sel
	}
	if a.lbHosts == nil {
		return nil
	}
	nodes, err := a.nodeList.List(a.lbHosts)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Cannot list the load-balancer hosts' Nodes")
		return nil
	}
	out := make([]string, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, n.Name)
	}
	slices.Sort(out)
	if !slices.Equal(out, a.lastLBNodes) {
		klog.FromContext(ctx).Info("Load-balancer hosts' Nodes, which get no new proxy flows while another node is healthy", "nodes", out, "selector", a.lbHosts.String())
		a.lastLBNodes = out
	}
	return out
}

// afterSetTargets runs in plan after the targets are given to the checker;
// tests use it to let the first probes finish there.
var afterSetTargets = func(*health.Checker, []health.Target) {}

// plan translates lbs. When they have health check targets that were never
// probed (a new Service or node, a Service switched to
// externalTrafficPolicy Local, the first sync after a start), it has them
// probed first and waits for the results, one health check interval at
// most: a node is programmed once a probe said it may take new flows, and
// a restart programs the same nodes as before it.
//
// Whether to wait is decided by what the translation saw, not by the
// states after SetTargets: a new target's first probe starts at once and
// may be back before they are read again, and the plan would then carry
// the Unknown the translation saw (every node taking new flows).
func (a *Agent) plan(ctx context.Context, lbs []*v1alpha1.LoadBalancer, nodes []backends.Backend) Plan {
	host := a.host(ctx, lbs)
	sawUnknown := false
	plan := a.translations.translate(lbs, nodes, host, func(t health.Target) health.State {
		st := a.checker.State(t)
		sawUnknown = sawUnknown || st == health.Unknown
		return st
	})
	a.checker.SetTargets(plan.Targets)
	afterSetTargets(a.checker, plan.Targets)
	if !sawUnknown {
		return plan
	}
	start := time.Now()
	all := a.checker.WaitProbed(ctx)
	klog.FromContext(ctx).V(2).Info("Probed new health check targets", "elapsed", time.Since(start), "all", all)
	return a.translations.translate(lbs, nodes, host, a.checker.State)
}

// nodeBackends are the Nodes every LoadBalancer sends to, from the Node cache.
func (a *Agent) nodeBackends(ctx context.Context) ([]backends.Backend, error) {
	nodes, err := a.nodeList.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	list, left := a.cfg.Backends.List(nodes)
	if left > 0 {
		klog.FromContext(ctx).Error(nil, "More nodes may carry traffic than a load balancer sends to; the first by name are used",
			"limit", backends.Max, "leftOut", left)
	}
	return list, nil
}

// cleanupRetry is how long after a failed conntrack clean-up the agent
// syncs again to retry it.
const cleanupRetry = 5 * time.Second

// cleanupFailed counts a failed clean-up of the conntrack entries of stale
// UDP flows and plans a sync to retry it. The data plane forwards as it
// should meanwhile: only those flows stay with their old backend.
func (a *Agent) cleanupFailed(ctx context.Context, err error) {
	conntrackCleanupErrors.WithLabelValues(cleanupStaleUDP).Inc()
	klog.FromContext(ctx).Error(err, "Cannot delete the conntrack entries of stale UDP flows; retrying", "after", cleanupRetry)
	a.retryAfter(cleanupRetry, &a.retrying)
}

// statusRetry is how long after a failed status write the agent syncs
// again, which reports again: otherwise the status would wait for the next
// change or --max-sync-interval (this host's membership state, for one,
// after its link came back).
const statusRetry = 2 * time.Second

// retryAfter plans a sync after d unless one is planned by the same flag.
func (a *Agent) retryAfter(d time.Duration, planned *atomic.Bool) {
	if planned.CompareAndSwap(false, true) {
		time.AfterFunc(d, func() {
			planned.Store(false)
			a.runner.Request()
		})
	}
}

// RequestSync asks for a sync soon.
func (a *Agent) RequestSync() { a.runner.Request() }

// Stuck reports whether the sync loop is stuck (see async.Runner.Stuck);
// /healthz fails then.
func (a *Agent) Stuck() error { return a.runner.Stuck() }

// Ready says why the agent is not ready yet (nil: it is): its /readyz,
// the Pod's readiness (see readiness).
func (a *Agent) Ready() error {
	if err := a.runner.Stuck(); err != nil {
		return err
	}
	return a.ready.ready(time.Now())
}

// report writes each LoadBalancer's status where it changed, with
// reportWorkers writes in flight.
func (a *Agent) report(ctx context.Context, lbs []*v1alpha1.LoadBalancer, owned, announced []netip.Addr, syncErr error, problems map[string]Problems) {
	now := metav1.Now()
	var member *membership.Status
	if a.cfg.Membership != nil {
		st := a.cfg.Membership.Status()
		member = &st
	}
	held := make(map[netip.Addr]bool, len(owned))
	for _, ad := range owned {
		held[ad] = true
	}
	adv := make(map[netip.Addr]bool, len(announced))
	for _, ad := range announced {
		adv[ad] = true
	}
	work := make(chan *v1alpha1.LoadBalancer)
	var wg sync.WaitGroup
	for range reportWorkers {
		wg.Go(func() {
			for lb := range work {
				a.reportOne(ctx, lb, held, adv, syncErr, problems[lb.Namespace+"/"+lb.Name], member, now)
			}
		})
	}
	for _, lb := range lbs {
		// The sync's copy may be older than the cache: report on the
		// cached object of the same generation (a newer generation gets a
		// sync and a report of its own).
		cur, err := a.lister.Get(lb.Namespace, lb.Name)
		if err != nil || cur == nil || cur.Generation != lb.Generation {
			continue // gone, or a newer generation
		}
		select {
		case work <- cur:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
}

func (a *Agent) reportOne(ctx context.Context, lb *v1alpha1.LoadBalancer, owned, announced map[netip.Addr]bool, syncErr error, problems Problems, member *membership.Status, now metav1.Time) {
	r := hostReport{Host: a.cfg.Host, Programmed: syncErr == nil, Message: "data plane programmed", Member: member, Problems: problems}
	if syncErr != nil {
		r.Message = syncErr.Error()
	}
	for _, s := range lb.Spec.Addresses {
		if ad, err := netip.ParseAddr(s); err == nil && owned[ad.Unmap()] {
			r.Held = append(r.Held, ad.Unmap())
		}
		if ad, err := netip.ParseAddr(s); err == nil && announced[ad.Unmap()] {
			r.Announcing = append(r.Announcing, ad.Unmap())
		}
	}
	r.ReportsReady = len(r.Held) > 0 || len(r.Announcing) > 0 || a.reportsUnheld(lb, problems) || len(inUseOf(lb, member)) > 0
	st, changed := desiredStatus(lb, r, now)
	if !changed || a.reports.inFlight(lb, st) {
		return
	}
	if err := a.writeStatus(ctx, lb, st); err != nil {
		klog.FromContext(ctx).Error(err, "Cannot write LoadBalancer status; retrying", "loadBalancer", klog.KObj(lb), "after", statusRetry)
		statusWriteFailures.Inc()
		a.reports.forget(lb)
		a.retryAfter(statusRetry, &a.retryingStatus)
		return
	}
	a.reports.wrote(lb, st)
}

func (a *Agent) writeStatus(ctx context.Context, lb *v1alpha1.LoadBalancer, st v1alpha1.LoadBalancerStatus) error {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		return err
	}
	return a.client.ApplyStatus(ctx, lb.Namespace, lb.Name, FieldManager(a.cfg.Host), obj)
}

// reportsUnheld reports whether this host writes the Ready condition of a
// LoadBalancer that no host holds an address of because none is usable:
// the host that would own its first address, so that one host says why.
func (a *Agent) reportsUnheld(lb *v1alpha1.LoadBalancer, problems Problems) bool {
	if len(problems.Messages) == 0 || len(lb.Spec.Addresses) == 0 {
		return false
	}
	var first netip.Addr
	for i, s := range lb.Spec.Addresses {
		ad, err := netip.ParseAddr(s)
		if err == nil && layer2.Usable(ad.Unmap()) == nil {
			return false // a host holds it, and writes Ready
		}
		if i == 0 && err == nil {
			first = ad.Unmap()
		}
	}
	return first.IsValid() && a.cfg.Owner != nil && a.cfg.Owner.Owns(first)
}

// FieldManager is the server-side-apply manager of one host's status fields.
func FieldManager(host string) string { return "groundcloud-agent/" + host }

// cleanup removes this host's rules and addresses on a clean shutdown.
func (a *Agent) cleanup(logger klog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.cfg.Addresses.Cleanup(ctx); err != nil {
		logger.Error(err, "Cannot remove virtual IPs")
	}
	if err := a.cfg.DataPlane.Cleanup(ctx); err != nil {
		logger.Error(err, "Cannot remove nftables tables")
	}
	logger.Info("Agent stopped; rules and addresses removed")
}

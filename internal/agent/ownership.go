package agent

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/health"
	"github.com/groundcloud/groundcloud/internal/kubecore"
	"github.com/groundcloud/groundcloud/internal/layer2"
	"github.com/groundcloud/groundcloud/internal/lbapi"
	"github.com/groundcloud/groundcloud/internal/membership"
)

// Values of --vip-ownership.
const (
	// OwnershipAll: this host holds every address (a lone load-balancer host).
	OwnershipAll = "all"
	// OwnershipMemberlist: the agents gossip and share the addresses
	// (internal/membership).
	OwnershipMemberlist = "memberlist"
	// OwnershipNone: another program (keepalived, a BGP speaker) holds the
	// addresses; this agent only programs forwarding.
	OwnershipNone = "none"
)

// Membership is an agent's membership among several load-balancer hosts
// that share the virtual IPs; *membership.Gossip implements it. It is also
// the agent's Owner.
type Membership interface {
	Owner
	// Run takes part in gossip until ctx ends.
	Run(ctx context.Context, hooks membership.Hooks) error
	// Observe gives it what a sync learned; the Owns calls after it see
	// the result.
	Observe(o membership.Observation)
	// Status is this host's standing, for LoadBalancer status.
	Status() membership.Status
	// Successor is the host that would hold vip if this one left ("":
	// none); a stopping agent (leaving) keeps what no other host would
	// take, a starting one what no other host holds.
	Successor(vip netip.Addr, leaving bool) string
}

// NoAddresses is the Owner of an agent whose addresses another program
// holds: it holds none.
type NoAddresses struct{}

// Owns is always false.
func (NoAddresses) Owns(netip.Addr) bool { return false }

// ConditionMember is the type of the condition in status.hosts that says
// whether the host may hold addresses (status True when it is Ready), why
// not (reason: its membership.State), and its gossip address and
// link-layer address (message): from the first the other agents find it,
// from the second they name it when it claims an address on the link,
// gossip or not.
const ConditionMember = "Member"

// ConditionGossip is the type of the condition in status.hosts that says
// whether the host gossips with every other (True), or why not (reason
// DecryptFailed: another host's key differs; NotJoined: hosts serve on the
// link but are not gossip members).
const ConditionGossip = "Gossip"

const (
	gossipPrefix = "gossip address "
	macPrefix    = ", link-layer address "
)

// memberCondition is this host's Member condition.
func memberCondition(s membership.Status, gen int64, now metav1.Time, existing []metav1.Condition) metav1.Condition {
	c := metav1.Condition{
		Type: ConditionMember, Status: metav1.ConditionFalse, Reason: string(s.State),
		ObservedGeneration: gen, LastTransitionTime: now, Message: gossipPrefix + s.Address,
	}
	if s.MAC != "" {
		c.Message += macPrefix + s.MAC
	}
	if s.State == membership.StateReady {
		c.Status = metav1.ConditionTrue
	}
	if s.Problem != "" {
		c.Message += "; " + s.Problem
	}
	if old := meta.FindStatusCondition(existing, ConditionMember); old != nil && old.Status == c.Status {
		c.LastTransitionTime = old.LastTransitionTime
	}
	return c
}

// gossipCondition is this host's Gossip condition.
func gossipCondition(g membership.GossipHealth, gen int64, now metav1.Time, existing []metav1.Condition) metav1.Condition {
	c := metav1.Condition{
		Type: ConditionGossip, Status: metav1.ConditionFalse, Reason: g.Reason,
		ObservedGeneration: gen, LastTransitionTime: now, Message: g.Message,
	}
	if g.OK() {
		c.Status = metav1.ConditionTrue
	}
	if old := meta.FindStatusCondition(existing, ConditionGossip); old != nil && old.Status == c.Status {
		c.LastTransitionTime = old.LastTransitionTime
	}
	return c
}

// gossipPeers returns the gossip addresses of hosts.
func gossipPeers(hosts []membership.Host) []string {
	var out []string
	for _, h := range hosts {
		if h.Addr != "" {
			out = append(out, h.Addr)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// publishedHosts returns the other hosts' Member conditions in the status
// of lbs, read: name, gossip address and link-layer address, by name. When
// LoadBalancers disagree (a host's report has not reached every one yet)
// the latest condition wins.
func publishedHosts(lbs []*v1alpha1.LoadBalancer, self string) []membership.Host {
	latest := map[string]*metav1.Condition{}
	for _, lb := range lbs {
		for _, h := range lb.Status.Hosts {
			c := meta.FindStatusCondition(h.Conditions, ConditionMember)
			if h.Name == self || c == nil || !strings.HasPrefix(c.Message, gossipPrefix) {
				continue
			}
			if old := latest[h.Name]; old == nil || old.LastTransitionTime.Before(&c.LastTransitionTime) ||
				old.LastTransitionTime.Equal(&c.LastTransitionTime) && c.Message > old.Message {
				latest[h.Name] = c
			}
		}
	}
	out := make([]membership.Host, 0, len(latest))
	for _, name := range slices.Sorted(maps.Keys(latest)) {
		out = append(out, parseMember(name, latest[name].Message))
	}
	return out
}

// hostsChanged reports whether the other hosts' Member conditions differ
// between two versions of a LoadBalancer: membership must learn at once
// of a host it cannot gossip with (see membership.Observation.Hosts).
func (a *Agent) hostsChanged(old, cur any) bool {
	if a.cfg.Membership == nil {
		return false
	}
	o, err1 := lbapi.Type.FromUnstructured(old)
	c, err2 := lbapi.Type.FromUnstructured(cur)
	if err1 != nil || err2 != nil {
		return true
	}
	return !slices.Equal(publishedHosts([]*v1alpha1.LoadBalancer{o}, a.cfg.Host), publishedHosts([]*v1alpha1.LoadBalancer{c}, a.cfg.Host))
}

// parseMember reads a Member condition's message: "gossip address
// <host:port>[, link-layer address <MAC>][; <problem>]".
func parseMember(name, msg string) membership.Host {
	h := membership.Host{Name: name}
	rest, _ := strings.CutPrefix(msg, gossipPrefix)
	rest, _, _ = strings.Cut(rest, ";")
	addr, mac, _ := strings.Cut(rest, macPrefix)
	if ap, err := netip.ParseAddrPort(strings.TrimSpace(addr)); err == nil {
		h.Addr = ap.String()
	}
	if hw, err := net.ParseMAC(strings.TrimSpace(mac)); err == nil {
		h.MAC = hw.String()
	}
	return h
}

// observation is what a sync tells membership.
func (a *Agent) observation(lbs []*v1alpha1.LoadBalancer, plan Plan, syncErr error) membership.Observation {
	reachable := len(plan.Targets) == 0
	for _, t := range plan.Targets {
		if a.checker.State(t) != health.Unhealthy { // unknown is no evidence
			reachable = true
			break
		}
	}
	hosts := publishedHosts(lbs, a.cfg.Host)
	groups, mine := groupsOf(lbs, a.labels())
	a.warnGroupsLeftOut(mine)
	vips := onLink(plan.VIPs, lbs)
	return membership.Observation{
		VIPs: vips, Fresh: a.heldBefore.fresh(vips, lbs, a.held), DataPlaneErr: syncErr, NodesReachable: reachable,
		Peers: gossipPeers(hosts), Hosts: hosts, Groups: groups, MyGroups: mine,
		Advertised: advertisedOf(lbs), Sessions: a.sessions.families(),
		Draining: a.cordoned(),
	}
}

// cordoned reports whether this host's Node is cordoned (kubectl cordon,
// drain): then membership hands its addresses to the other hosts.
func (a *Agent) cordoned() bool {
	if a.nodeList == nil {
		return false
	}
	n, err := a.nodeList.Get(a.cfg.Host)
	return err == nil && n.Spec.Unschedulable
}

// heldBefore remembers, while they stay virtual IPs, the addresses some
// load-balancer host is known to have held: a LoadBalancer status named a
// holder of it once, or this host held it. A probe is for an address no
// host has held yet (a new Service's); the status alone would not say that
// reliably at the moment it matters: when a holder fails, the status may
// be between writes (the host that handed the address back cleared its
// name after the taker wrote its own, or the taker could not write while
// its link was down), and the survivor would probe an address it must take
// at once.
type heldBefore map[netip.Addr]bool

// fresh returns those of vips that no LoadBalancer's status names a
// holder of, that this host does not hold (held) and that h has not seen
// held before; it remembers the rest and forgets addresses that are no
// longer virtual IPs (a new Service that gets one is probed again).
func (h *heldBefore) fresh(vips []netip.Addr, lbs []*v1alpha1.LoadBalancer, held map[netip.Addr]bool) map[netip.Addr]bool {
	if *h == nil {
		*h = heldBefore{}
	}
	for _, lb := range lbs {
		for _, a := range lb.Status.Addresses {
			if ad, err := netip.ParseAddr(a.Address); err == nil && a.Host != "" {
				(*h)[ad.Unmap()] = true
			}
		}
	}
	for v := range held {
		(*h)[v] = true
	}
	current := map[netip.Addr]bool{}
	out := map[netip.Addr]bool{}
	for _, v := range vips {
		current[v] = true
		if !(*h)[v] {
			out[v] = true
		}
	}
	maps.DeleteFunc(*h, func(v netip.Addr, _ bool) bool { return !current[v] })
	return out
}

// warnGroupsLeftOut logs, when their number changes, the host groups
// beyond membership.MaxGroups that this host belongs to: its gossip
// metadata has no room for them, so the other hosts never elect it for
// their addresses. The cloud-config refuses more host selectors than that;
// LoadBalancers written before it did may still carry them.
func (a *Agent) warnGroupsLeftOut(mine []string) {
	left := max(len(mine)-membership.MaxGroups, 0)
	if left != a.groupsLeftOut && left > 0 {
		klog.Background().Error(nil, "This host matches more host selectors than its gossip metadata can publish; it serves none of the addresses of the groups left out",
			"groups", len(mine), "max", membership.MaxGroups, "leftOut", mine[membership.MaxGroups:])
	}
	a.groupsLeftOut = left
}

func (a *Agent) membershipHooks(ctx context.Context) membership.Hooks {
	return membership.Hooks{
		Sync: func(announce bool) {
			if announce {
				a.reannounce.Store(true)
			}
			a.runner.Request()
		},
		SyncWait: func(wctx context.Context, announce bool) {
			if announce {
				a.reannounce.Store(true)
			}
			_ = a.runner.RequestAndWait(wctx) // the caller logs a wait cut short
		},
		Announce: func() { a.cfg.Addresses.Announce(ctx) },
		Conflict: func(c membership.Conflict) { a.recordConflict(c) },
		InUse: func(u membership.InUse) {
			a.recordInUse(u)
			a.runner.Request() // report it in status
		},
		LinkUp: func() {
			if a.cfg.Reconnect != nil {
				klog.FromContext(ctx).Info("Reconnecting to the apiserver: the interface came back up")
				a.cfg.Reconnect()
			}
		},
	}
}

// recordConflict raises an Event on each Service (or LoadBalancer, when it
// has no Service owner) whose address is in a split brain.
func (a *Agent) recordConflict(c membership.Conflict) {
	if a.cfg.Events == nil {
		return
	}
	lbs, err := a.lister.List()
	if err != nil {
		return
	}
	other := "MAC " + c.MAC + " (no known agent)"
	if c.Host != "" {
		other = "host " + c.Host + " (" + c.MAC + ")"
	}
	how := "its kernel still holds it, its agent does not claim it"
	if c.Active {
		how = "its agent claims it and gossip between the two is cut"
	}
	for _, lb := range lbs {
		if !slices.Contains(lb.Spec.Addresses, c.VIP.String()) {
			continue
		}
		ref := eventTarget(lb)
		switch c.Action {
		case membership.ActionDefend:
			a.cfg.Events.Eventf(ref, corev1.EventTypeWarning, "SplitBrain",
				"%s is also answered by %s: %s; %s keeps it and announces it", c.VIP, other, how, a.cfg.Host)
		case membership.ActionYield:
			a.cfg.Events.Eventf(ref, corev1.EventTypeWarning, "SplitBrain",
				"%s is also answered by %s: %s; %s withdraws it, %s wins the tie-break", c.VIP, other, how, a.cfg.Host, c.Host)
		default:
			a.cfg.Events.Eventf(ref, corev1.EventTypeNormal, "SplitBrainResolved",
				"%s is answered by one host again (seen from %s)", c.VIP, a.cfg.Host)
		}
	}
}

// recordInUse raises an Event on each Service (or LoadBalancer) whose
// address a station that is no load-balancer host claims, or no longer
// claims.
func (a *Agent) recordInUse(u membership.InUse) {
	if a.cfg.Events == nil {
		return
	}
	lbs, err := a.lister.List()
	if err != nil {
		return
	}
	for _, lb := range lbs {
		if !slices.Contains(lb.Spec.Addresses, u.VIP.String()) {
			continue
		}
		ref := eventTarget(lb)
		switch {
		case u.Ended:
			a.cfg.Events.Eventf(ref, corev1.EventTypeNormal, "AddressConflictResolved",
				"%s is no longer claimed by MAC %s (seen from %s)", u.VIP, u.MAC, a.cfg.Host)
		case u.Announced:
			a.cfg.Events.Eventf(ref, corev1.EventTypeWarning, "AddressConflict",
				"%s is also claimed by MAC %s, which is no load-balancer host: clients may reach either; %s keeps it and announces it. Find the station and remove the address from it, or take the address out of the pool", u.VIP, u.MAC, a.cfg.Host)
		default:
			a.cfg.Events.Eventf(ref, corev1.EventTypeWarning, "AddressConflict",
				"%s is in use by MAC %s, which is no load-balancer host: %s does not announce it while that station answers for it. Find the station and remove the address from it, or ask for another address", u.VIP, u.MAC, a.cfg.Host)
		}
	}
}

// eventTarget is the Service owning lb, or lb itself.
func eventTarget(lb *v1alpha1.LoadBalancer) *corev1.ObjectReference {
	for _, o := range lb.OwnerReferences {
		if o.Kind == "Service" && o.APIVersion == "v1" {
			return &corev1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: lb.Namespace, Name: o.Name, UID: o.UID}
		}
	}
	return &corev1.ObjectReference{
		Kind: "LoadBalancer", APIVersion: v1alpha1.SchemeGroupVersion.String(),
		Namespace: lb.Namespace, Name: lb.Name, UID: lb.UID,
	}
}

// checkLoosePickup says whether conntrack picks up established TCP
// connections, which they need to survive a failover to this host. It
// runs after the first sync: the sysctl exists once nf_conntrack is loaded.
func checkLoosePickup(logger klog.Logger) {
	b, err := os.ReadFile("/proc/sys/net/netfilter/nf_conntrack_tcp_loose")
	switch {
	case err != nil:
		logger.Error(err, "Cannot check that conntrack picks up established TCP connections; they may not survive a failover")
	case strings.TrimSpace(string(b)) != "1":
		logger.Error(nil, "Established TCP connections will not survive a failover to this host: net.netfilter.nf_conntrack_tcp_loose is 0; set it to 1 on every load-balancer host")
	default:
		logger.Info("Conntrack picks up established TCP connections (net.netfilter.nf_conntrack_tcp_loose=1): they survive a failover")
	}
}

// vipOwnership is what --vip-ownership asks for.
type vipOwnership struct {
	Owner      Owner
	Membership Membership // memberlist, and all (alone, for its address probes)
	Events     record.EventRecorder
	Conntrack  Forgetter // memberlist only
}

// ownership builds the Owner, an event recorder (stopped when ctx ends),
// the Membership (memberlist; all: a lone one, membership.Config.Solo),
// and for memberlist the conntrack cleaner of takeovers.
func (o *Options) ownership(ctx context.Context, core *kubecore.Client) (vipOwnership, error) {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(core.Events())
	context.AfterFunc(ctx, b.Shutdown)
	rec := b.NewRecorder(kubecore.Scheme, corev1.EventSource{Component: "groundcloud-agent", Host: o.Host})
	switch o.Ownership {
	case OwnershipNone:
		return vipOwnership{Owner: NoAddresses{}, Events: rec}, nil
	case OwnershipMemberlist:
	default:
		// Alone, it still probes new addresses and watches held ones for
		// stations that are no load-balancer host (membership/solo.go).
		membership.RegisterMetrics()
		g := membership.New(o.Membership.SoloConfig(o.Host, o.Interface))
		return vipOwnership{Owner: g, Membership: g, Events: rec}, nil
	}
	mcfg, err := o.Membership.Config(o.Host, o.Interface)
	if err != nil {
		return vipOwnership{}, err
	}
	membership.RegisterMetrics()
	g := membership.New(mcfg)
	return vipOwnership{Owner: g, Membership: g, Events: rec, Conntrack: ConntrackForgetter{}}, nil
}

// validateOwnership reports problems of --vip-ownership and its options.
func (o *Options) validateOwnership() error {
	switch o.Ownership {
	case OwnershipNone:
		return nil
	case OwnershipAll:
		return o.Membership.ValidateSolo()
	case OwnershipMemberlist:
		return o.Membership.Validate()
	}
	return fmt.Errorf("--vip-ownership %q: want %s, %s or %s", o.Ownership, OwnershipAll, OwnershipMemberlist, OwnershipNone)
}

// releaser is an Owner that hands some of the addresses it owns over while
// it still holds them (*membership.Gossip, in a drain hand-over).
type releaser interface {
	Releasing(vip netip.Addr) bool
}

// quieter is Addresses that can hold some addresses without announcing
// them (*layer2.Manager).
type quieter interface {
	Quiet(addrs []netip.Addr)
}

var (
	_ releaser = (*membership.Gossip)(nil)
	_ quieter  = (*layer2.Manager)(nil)
)

// quiet tells the Addresses which of owned this host is handing over:
// they stay on the interface, so that what clients still send here is
// forwarded, but are not announced, so that no client is drawn back to
// this host just before it removes them (docs/high-availability.md,
// "Maintenance: drain and reboot").
func (a *Agent) quiet(owned []netip.Addr) {
	q, ok := a.cfg.Addresses.(quieter)
	r, ok2 := a.cfg.Owner.(releaser)
	if !ok || !ok2 {
		return
	}
	var out []netip.Addr
	for _, v := range owned {
		if r.Releasing(v) {
			out = append(out, v)
		}
	}
	q.Quiet(out)
}

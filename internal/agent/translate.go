package agent

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/backends"
	"github.com/groundcloud/groundcloud/internal/dataplane"
	"github.com/groundcloud/groundcloud/internal/health"
	"github.com/groundcloud/groundcloud/internal/layer2"
)

// Plan is what the agent should do for a set of LoadBalancers.
type Plan struct {
	State   dataplane.State
	Targets []health.Target // every probe target, once
	VIPs    []netip.Addr    // every usable virtual IP of every LoadBalancer, sorted
	// Problems are the parts of each LoadBalancer that are not programmed,
	// by "namespace/name"; LoadBalancers without problems are not in it.
	Problems map[string]Problems
}

// Problems are what the agent leaves out of one LoadBalancer, and why.
type Problems struct {
	// Conflict: a frontend (address, protocol, port) is another
	// LoadBalancer's, whose name sorts first.
	Conflict bool
	// Messages say what is left out, one per part.
	Messages []string
	// OwnNodeOnly: this host is a Node and the only healthy backend, which
	// proxy forwarding cannot serve (dataplane.ForNewFlows).
	OwnNodeOnly bool
	// NoHealthyBackend: no backend has passed its health check since this
	// agent first saw the LoadBalancer (neverhealthy.go).
	NoHealthyBackend bool
	// OffLink are the backends (node names, sorted) that passthrough
	// forwarding cannot reach: their addresses are on no link of the
	// host's interface, so they get none of its flows.
	OffLink []string
}

// Host is what Translate needs to know of the load-balancer host.
type Host struct {
	// Node is the name of the Node this host is ("" for a dedicated host).
	Node string
	// Interface is where the VIPs are announced, which passthrough
	// forwarding receives and sends on; Links are its prefixes.
	Interface string
	Links     []netip.Prefix
	// LBNodes are the Nodes that are load-balancer hosts, sorted
	// (dataplane.State.LBNodes).
	LBNodes []string
}

func (p *Problems) add(conflict bool, msg string) {
	p.Conflict = p.Conflict || conflict
	p.Messages = append(p.Messages, msg)
}

// Translate turns LoadBalancer objects into data plane state and the health
// targets to probe, for host; nodes are the backends of every LoadBalancer
// (backends.List of the Nodes), state says what is known of a target. A backend gets
// new flows when the target of its first address is Healthy; while it is
// Unknown (not probed yet) only when no backend of its LoadBalancer is
// Healthy (the agent waits for first probes before it programs, so that
// happens only when they take longer than that wait: then it does what it
// did before the first probe existed rather than reject every flow).
func Translate(lbs []*v1alpha1.LoadBalancer, nodes []backends.Backend, host Host, state func(health.Target) health.State) Plan {
	return (*translateMemo)(nil).translate(lbs, nodes, host, state)
}

// translateMemo keeps what Translate made of each LoadBalancer object but
// its backends, by the object: the informer's cache replaces an object
// when it changes and never changes one in place, so the same pointer
// translates the same. Thousands of LoadBalancers are parsed and
// formatted once, not on every sync. A nil *translateMemo keeps nothing.
type translateMemo struct {
	entries map[*v1alpha1.LoadBalancer]*translated
	sweeps  uint64 // Translates so far; an entry not used by the last is forgotten
}

// translated is one LoadBalancer's Service without Backends, and its
// problems (Messages clipped: appending to them copies).
type translated struct {
	svc   dataplane.Service
	bad   Problems
	sweep uint64
}

// one is translateOne, from the memo when lb was translated before. The
// Backends come from shared each time.
func (m *translateMemo) one(lb *v1alpha1.LoadBalancer, state func(health.Target) health.State, targets map[health.Target]struct{}, shared *backendLists) (dataplane.Service, Problems) {
	if m == nil {
		return translateOne(lb, state, targets, shared)
	}
	t := m.entries[lb]
	if t == nil {
		t = &translated{}
		t.svc, t.bad = translateSpec(lb)
		t.bad.Messages = slices.Clip(t.bad.Messages)
		m.entries[lb] = t
	}
	t.sweep = m.sweeps
	svc := t.svc
	svc.Backends = backendsOf(lb, state, targets, shared)
	return svc, t.bad
}

// begin and end bracket one Translate: end forgets the objects it did not
// ask for.
func (m *translateMemo) begin() {
	if m != nil && m.entries == nil {
		m.entries = map[*v1alpha1.LoadBalancer]*translated{}
	}
}

func (m *translateMemo) end() {
	if m == nil {
		return
	}
	for lb, t := range m.entries {
		if t.sweep != m.sweeps {
			delete(m.entries, lb)
		}
	}
	m.sweeps++
}

// translate is Translate, with the memo.
func (m *translateMemo) translate(lbs []*v1alpha1.LoadBalancer, nodes []backends.Backend, host Host, state func(health.Target) health.State) Plan {
	m.begin()
	defer m.end()
	var p Plan
	self := host.Node
	p.State.Self, p.State.Interface, p.State.Links, p.State.LBNodes = self, host.Interface, host.Links, host.LBNodes
	targets := map[health.Target]struct{}{}
	vips := map[netip.Addr]struct{}{}
	shared := &backendLists{nodes: nodes}
	p.State.Services = make([]dataplane.Service, 0, len(lbs))
	problems := map[string]Problems{}
	for _, lb := range lbs {
		svc, bad := m.one(lb, state, targets, shared)
		if len(bad.Messages) > 0 {
			problems[svc.Name] = bad
		}
		p.State.Services = append(p.State.Services, svc)
	}
	slices.SortFunc(p.State.Services, func(a, b dataplane.Service) int { return strings.Compare(a.Name, b.Name) })
	// What the data plane leaves out: frontends another LoadBalancer
	// holds, invalid parts.
	for name, dp := range dataplane.Problems(p.State) {
		bad := problems[name]
		for _, pr := range dp {
			bad.add(pr.Conflict, pr.Err.Error())
			if pr.OffLinkNode != "" && !slices.Contains(bad.OffLink, pr.OffLinkNode) {
				bad.OffLink = append(bad.OffLink, pr.OffLinkNode)
			}
		}
		slices.Sort(bad.OffLink)
		problems[name] = bad
	}
	for _, svc := range p.State.Services {
		if svc.Forwarding == dataplane.Passthrough {
			continue // its own kube-proxy serves the host's own node
		}
		if _, only := dataplane.ForNewFlows(svc.Backends, self, p.State.LBNodes); only {
			bad := problems[svc.Name]
			bad.OwnNodeOnly = true
			bad.add(false, fmt.Sprintf("the only healthy backend is this load-balancer host's own node %s, "+
				"which proxy forwarding cannot reach through its own NodePort: add another node or use passthrough forwarding", self))
			problems[svc.Name] = bad
		}
	}
	if len(problems) > 0 {
		p.Problems = problems
	}
	for _, svc := range p.State.Services {
		for _, a := range svc.VIPs {
			vips[a] = struct{}{}
		}
	}
	for t := range targets {
		p.Targets = append(p.Targets, t)
	}
	slices.SortFunc(p.Targets, compareTargets)
	for a := range vips {
		p.VIPs = append(p.VIPs, a)
	}
	slices.SortFunc(p.VIPs, netip.Addr.Compare)
	return p
}

// backendLists shares translated backend lists among the LoadBalancers of
// one Translate: every LoadBalancer sends to the same nodes, and those with
// the same health check (usually all of them) share one list. A copy per
// LoadBalancer per sync was the largest part of the agent's memory at
// thousands of them. The lists are read-only.
type backendLists struct {
	nodes []backends.Backend
	keys  []backendsKey
	lists [][]dataplane.Backend
}

// bucketGroup is lb's bucket group in the data plane (see
// dataplane.Service.BucketGroup): its health check, which every
// LoadBalancer with externalTrafficPolicy Cluster shares (the cloud-config's
// cluster-health-check), so that they share one bucket map and a node change
// rewrites that map only; "" for Local, whose check (its own
// healthCheckNodePort) is its alone.
func bucketGroup(lb *v1alpha1.LoadBalancer) string {
	if lb.Spec.ExternalTrafficPolicy == string(v1.ServiceExternalTrafficPolicyLocal) {
		return ""
	}
	hc := lb.Spec.HealthCheck
	if hc == nil {
		return "unchecked"
	}
	if hc.Type == v1alpha1.HealthCheckTCP {
		return fmt.Sprintf("tcp:%d", hc.Port)
	}
	return fmt.Sprintf("http:%d%s", hc.Port, hc.Path)
}

type backendsKey struct {
	check   v1alpha1.HealthCheck
	checked bool
}

func keyOf(lb *v1alpha1.LoadBalancer) backendsKey {
	var k backendsKey
	if hc := lb.Spec.HealthCheck; hc != nil {
		k.check, k.checked = *hc, true
	}
	return k
}

// maxSharedLists bounds the lists compared against each LoadBalancer's.
const maxSharedLists = 8

func (s *backendLists) find(k backendsKey) ([]dataplane.Backend, bool) {
	for i, known := range s.keys {
		if known == k {
			return s.lists[i], true
		}
	}
	return nil, false
}

func (s *backendLists) add(k backendsKey, list []dataplane.Backend) {
	if len(s.keys) < maxSharedLists {
		s.keys, s.lists = append(s.keys, k), append(s.lists, list)
	}
}

func translateOne(lb *v1alpha1.LoadBalancer, state func(health.Target) health.State, targets map[health.Target]struct{}, shared *backendLists) (dataplane.Service, Problems) {
	svc, bad := translateSpec(lb)
	svc.Backends = backendsOf(lb, state, targets, shared)
	return svc, bad
}

// translateSpec is what lb's spec alone makes of its Service: all but the
// Backends.
func translateSpec(lb *v1alpha1.LoadBalancer) (dataplane.Service, Problems) {
	svc := dataplane.Service{
		Name:     lb.Namespace + "/" + lb.Name,
		Affinity: lb.Spec.SessionAffinity == string(v1.ServiceAffinityClientIP),
	}
	if lb.Spec.Forwarding == v1alpha1.ForwardingPassthrough {
		svc.Forwarding = dataplane.Passthrough
	}
	// A BGP address is routed to the hosts, never held on an interface,
	// on any host: the data plane must not route back what it does not
	// translate.
	if an := lb.Spec.Announce; an != nil && an.Mode == v1alpha1.AnnounceBGP {
		svc.Routed = true
	}
	var bad Problems
	for _, s := range lb.Spec.Addresses {
		a, err := netip.ParseAddr(s)
		if err != nil {
			bad.add(false, fmt.Sprintf("address %q is not an IP address", s))
			continue
		}
		if err := layer2.Usable(a.Unmap()); err != nil {
			bad.add(false, err.Error())
			continue
		}
		svc.VIPs = append(svc.VIPs, a.Unmap())
	}
	for _, p := range lb.Spec.Ports {
		svc.Ports = append(svc.Ports, dataplane.Port{
			Name: p.Name, Protocol: dataplane.Protocol(p.Protocol),
			Port: uint16(p.Port), NodePort: uint16(p.NodePort),
		})
	}
	for _, r := range lb.Spec.SourceRanges {
		pfx, err := netip.ParsePrefix(r)
		if err != nil {
			// Kept invalid: a range that matches no client must not widen
			// access to every client (the data plane reports it).
			svc.SourceRanges = append(svc.SourceRanges, netip.Prefix{})
			bad.add(false, fmt.Sprintf("source range %q is not a CIDR", r))
			continue
		}
		svc.SourceRanges = append(svc.SourceRanges, pfx.Masked())
	}
	svc.BucketGroup = bucketGroup(lb)
	return svc, bad
}

// backendsOf is lb's backend list. It depends on the health check only:
// LoadBalancers with the same share one list (the first with it added its
// targets already).
func backendsOf(lb *v1alpha1.LoadBalancer, state func(health.Target) health.State, targets map[health.Target]struct{}, shared *backendLists) []dataplane.Backend {
	k := keyOf(lb)
	if list, ok := shared.find(k); ok {
		return list
	}
	list := make([]dataplane.Backend, 0, len(shared.nodes))
	var unknown []int // indexes in list
	anyHealthy := false
	for _, b := range shared.nodes {
		be := dataplane.Backend{Node: b.Name, Addrs: b.Addrs, Healthy: true}
		if len(be.Addrs) == 0 {
			continue
		}
		if hc := lb.Spec.HealthCheck; hc != nil {
			t := health.Target{Addr: be.Addrs[0], Port: hc.Port, Path: hc.Path, TCP: hc.Type == v1alpha1.HealthCheckTCP}
			targets[t] = struct{}{}
			st := state(t)
			be.Healthy = st == health.Healthy
			if st == health.Unknown {
				unknown = append(unknown, len(list))
			}
		}
		anyHealthy = anyHealthy || be.Healthy
		list = append(list, be)
	}
	if !anyHealthy {
		for _, i := range unknown {
			list[i].Healthy = true
		}
	}
	shared.add(k, list)
	return list
}

func compareTargets(a, b health.Target) int {
	if c := a.Addr.Compare(b.Addr); c != 0 {
		return c
	}
	if a.Port != b.Port {
		return int(a.Port - b.Port)
	}
	if a.TCP != b.TCP {
		if a.TCP {
			return 1
		}
		return -1
	}
	return strings.Compare(a.Path, b.Path)
}

package membership

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
	"k8s.io/klog/v2"
)

// Config is what a Gossip needs; Options.Config builds it.
type Config struct {
	// Name is this host's member name: its --host-name, unique among agents.
	Name string
	// Interface faces clients: its state is part of this host's health,
	// its MAC identifies the host in ARP, its first address is the default
	// gossip address, and conflicts are watched on it.
	Interface string
	// BindHost and BindPort are the gossip address; an empty BindHost means
	// the first address of Interface that is not a virtual IP.
	BindHost string
	BindPort int
	// Seeds are host:port addresses to join.
	Seeds []string
	// Key encrypts and authenticates gossip (AES, 16, 24 or 32 bytes).
	Key                         []byte
	ProbeInterval, ProbeTimeout time.Duration
	SuspicionMult               int
	HoldDown                    time.Duration
	ConflictProbeInterval       time.Duration
	// AddressProbes and AddressProbeSpacing: see Options.
	AddressProbes       int
	AddressProbeSpacing time.Duration
	// Solo: this host is the only load-balancer host
	// (--vip-ownership=all). It does not gossip and owns every address,
	// whatever its state, but probes new addresses and watches the link
	// for stations claiming them as a member does (solo.go). Only Name,
	// Interface and the probe settings count.
	Solo bool
}

// Observation is what the agent learned about itself and from the API in
// one sync.
type Observation struct {
	// VIPs are every virtual IP of every LoadBalancer.
	VIPs []netip.Addr
	// DataPlaneErr is the last data plane sync's error (nil: the table is
	// in place and current).
	DataPlaneErr error
	// NodesReachable: some node answers its health check, or there is none
	// to check.
	NodesReachable bool
	// Peers are gossip addresses (host:port) other agents published in
	// LoadBalancer status.
	Peers []string
	// Hosts are the other agents LoadBalancer status names, with their
	// link-layer addresses: the guard names the station claiming an address
	// from them, and a host heard serving that gossip does not show counts
	// as a member (see presence.go).
	Hosts []Host
	// Groups are the host groups (Group) of the virtual IPs that only some
	// hosts may own; MyGroups those this host belongs to (groups.go).
	Groups   map[netip.Addr]string
	MyGroups []string
	// Advertised are the virtual IPs whose owner advertises them over BGP
	// (proxy forwarding) instead of holding them on the link: only a
	// member with an established session of the address's family may own
	// one (bgp.go).
	Advertised map[netip.Addr]bool
	// Sessions are the address families ("ipv4", "ipv6") of this host's
	// established BGP sessions.
	Sessions []string
	// Fresh are the virtual IPs on the link that no load-balancer host has
	// held yet (no LoadBalancer status names a holder): this host probes
	// them before it first holds one (probe.go).
	Fresh map[netip.Addr]bool
	// Draining: this host's Node is cordoned (spec.unschedulable): while
	// Ready it publishes StateDraining and, handOver later, yields
	// its addresses to the Ready members (it keeps those no Ready member
	// may hold).
	Draining bool
}

// handOver is how long a host that starts draining goes on holding its
// addresses after it has told the others, so that they add theirs before
// it removes its own (a gossip round is 200 ms; an agent's sync takes
// 100 ms and more).
const handOver = time.Second

// readyWait bounds how long a host that takes addresses over (it became
// Ready, say) waits for its sync before it tells the others
// (Hooks.SyncWait): a sync takes 100 ms and more, a slow one on a busy
// host seconds.
const readyWait = time.Second

// Hooks are how a Gossip tells its agent what to do. They are called from
// the Gossip's goroutines and must not block, but for SyncWait, which
// blocks until its context ends at most.
type Hooks struct {
	// Sync: ownership may have changed; announce: also announce every held
	// address again after the sync (a member came back, and another host may
	// have announced addresses this host holds).
	Sync func(announce bool)
	// SyncWait is Sync that returns when a sync it asked for has ended,
	// or when ctx is done (nil: Sync, without waiting). A host that
	// takes addresses over by what it publishes (it became Ready, may
	// advertise another BGP family, serves another host group) waits for
	// it before it tells the others, so that it adds the addresses before
	// they remove theirs.
	SyncWait func(ctx context.Context, announce bool)
	// Announce every held address again now (defending against another
	// host that answers for one).
	Announce func()
	// Conflict reports a split brain that started, changed or ended.
	Conflict func(Conflict)
	// InUse reports an address that a station which is no load-balancer
	// host started or stopped claiming (probe.go).
	InUse func(InUse)
	// LinkUp: the interface came up after being seen down (nil: nothing
	// to do). Connections opened before it may wait seconds for TCP to
	// retransmit what they sent while it was down.
	LinkUp func()
}

// Status is this host's standing, for LoadBalancer status.
type Status struct {
	State State
	// Problem says why the host is unhealthy ("" when it is not).
	Problem string
	// Address is the gossip address, host:port ("" before Run binds it).
	Address string
	// MAC is the link-layer address of the interface ("" before Run reads
	// it, or when it has none).
	MAC string
	// Gossip says whether gossip with every other host works.
	Gossip GossipHealth
	// InUse are the addresses this host owns that a station which is no
	// load-balancer host claims (probe.go).
	InUse []InUse
	// Solo: a lone host (Config.Solo), which gossips with nobody: only
	// InUse says something.
	Solo bool
}

// Gossip is this host's membership among the agents sharing the virtual
// IPs: it gossips with them (hashicorp/memberlist), decides this host's
// State, tells which addresses it owns and watches the link for another
// host answering for them. New only constructs; Run does the work.
type Gossip struct {
	cfg       Config
	kick      chan struct{}              // capacity 1: evaluate again
	linkState func(string) (bool, error) // linkIsUp; tests replace it

	mu          sync.Mutex
	observed    bool
	obs         Observation
	vips        map[netip.Addr]bool // obs.VIPs, unmapped
	linkUp      bool
	linkBack    bool // the link came up since the loop last looked
	joined      bool
	ready       *readiness
	published   State             // the State others were last told
	leaving     bool              // the agent stops: publish StateLeaving
	drainers    []string          // Draining members that own what no Ready one may, sorted
	drainSince  time.Time         // when this Ready host began draining (zero: it is not)
	yielded     bool              // its drain hand-over is over: it yields its addresses
	peers       map[string]Member // alive (or suspect) members but this host, by name
	macs        map[string]string // MAC -> member name, of every member ever seen
	known       map[string]bool   // gossip addresses to join when they are not members
	joining     map[string]bool   // joins in flight
	cands       []string          // members that own addresses, sorted
	candGroups  candidateGroups   // the groups of each of cands
	candBGP     candidateFamilies // the BGP families each of cands may advertise
	pubGroups   []string          // the groups others were last told
	bgp         bgpReadiness      // which families this host may advertise
	pubBGP      []string          // the families others were last told
	pubSessions []string          // the session families others were last told
	suppressed  map[netip.Addr]bool
	conflicts   *conflicts
	probes      *probes // nil: new addresses are held without a probe
	probeKick   chan struct{}
	probeV6     bool   // the guard can probe IPv6 addresses
	addr        string // our gossip address, host:port
	mac         string
	newPeer     bool // a member joined since the last evaluation

	apiHosts    []Host               // obs.Hosts
	apiMACs     map[string]string    // MAC -> host, from apiHosts
	heard       map[string]time.Time // MAC -> last time it claimed a VIP on the link
	gossiped    map[string]bool      // members ever seen in gossip, by name
	listenSince time.Time            // when the guard started listening (zero: not yet)
	guardOff    bool                 // the guard does not run: nothing is heard
	gerrs       *gossipErrors
	health      GossipHealth // at the last evaluation
}

// New returns a Gossip; it touches nothing until Run.
func New(cfg Config) *Gossip {
	g := &Gossip{
		cfg:        cfg,
		kick:       make(chan struct{}, 1),
		linkState:  linkIsUp,
		ready:      newReadiness(cfg.HoldDown),
		bgp:        newBGPReadiness(cfg.HoldDown),
		published:  StateStarting,
		peers:      map[string]Member{},
		macs:       map[string]string{},
		known:      map[string]bool{},
		joining:    map[string]bool{},
		suppressed: map[netip.Addr]bool{},
		conflicts:  newConflicts(cfg.ConflictProbeInterval),
		probeKick:  make(chan struct{}, 1),
		probeV6:    true,
		linkUp:     true,
		apiMACs:    map[string]string{},
		heard:      map[string]time.Time{},
		gossiped:   map[string]bool{},
		gerrs:      newGossipErrors(),
		health:     GossipHealth{Reason: GossipHealthy, Message: "no gossip errors"},
	}
	if cfg.AddressProbes > 0 {
		g.probes = newProbes(cfg.AddressProbes, cfg.AddressProbeSpacing, cfg.ConflictProbeInterval)
	}
	for _, s := range cfg.Seeds {
		g.known[s] = true
	}
	return g
}

// Owns reports whether this host holds vip now: it is Ready, rendezvous
// hashing over the Ready members that may own vip (of its host group, able
// to advertise it when it is advertised over BGP) gives it vip, and it does
// not yield vip in a split brain.
func (g *Gossip) Owns(vip netip.Addr) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	vip = vip.Unmap()
	return !g.suppressed[vip] && !g.probes.blocked(vip) && g.owner(vip) == g.cfg.Name
}

// owner is the owner of vip among the candidates of its group (and, when
// it is advertised over BGP, that may advertise it); g.mu is held.
func (g *Gossip) owner(vip netip.Addr) string {
	if g.cfg.Solo {
		return g.cfg.Name
	}
	vip = vip.Unmap()
	cands := g.eligible(g.cands, vip)
	if len(cands) == 0 {
		cands = g.eligible(g.drainers, vip)
	}
	return Owner(vip, cands)
}

// eligible are those of names that may hold vip: of its group, and, when
// it is advertised over BGP, with a session of its family; g.mu is held.
func (g *Gossip) eligible(names []string, vip netip.Addr) []string {
	out := g.candGroups.in(names, g.groupOf(vip))
	if g.obs.Advertised[vip] {
		out = g.candBGP.advertising(out, vip)
	}
	return out
}

// Holder returns the member that holds vip now by the rules of Owns and,
// when it is another member, the host of its gossip address (invalid when
// it is this host, none, or its address is unknown). A host that takes vip
// over from a member still up asks it beforehand, to copy that member what
// it cannot translate of the flows the member forwarded (the agent's
// hand-over).
func (g *Gossip) Holder(vip netip.Addr) (string, netip.Addr) {
	g.mu.Lock()
	defer g.mu.Unlock()
	name := g.owner(vip.Unmap())
	if name == "" || name == g.cfg.Name {
		return name, netip.Addr{}
	}
	ap, err := netip.ParseAddrPort(g.peers[name].Addr)
	if err != nil {
		return name, netip.Addr{}
	}
	return name, ap.Addr().Unmap()
}

// Successor returns the member that would hold vip if this host left
// now: the owner by the same rules as Owns among the other Ready members
// ("" when none may hold it). A stopping agent asks it (leaving) to
// decide whether to hand its addresses over or to leave them in place for
// the agent that starts next; a starting one, whether an address it finds
// on the interface is anyone else's.
//
// leaving: this host stops and publishes StateLeaving before it leaves
// the gossip (Run). When no other member serves, the members in their
// hold-down then become Ready at once (readiness.update: others alive,
// none serving) and own what it held: they count. Not so for a host that
// stays: a member in its hold-down takes nothing from it.
func (g *Gossip) Successor(vip netip.Addr, leaving bool) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	vip = vip.Unmap()
	notSelf := func(c string) bool { return c == g.cfg.Name }
	others := slices.DeleteFunc(slices.Clone(g.cands), notSelf)
	drainers := slices.DeleteFunc(slices.Clone(g.drainers), notSelf)
	cands := g.eligible(others, vip)
	if len(cands) == 0 {
		cands = g.eligible(drainers, vip)
	}
	if leaving && len(cands) == 0 {
		// Nobody may take it now, but this host's leave changes that:
		// with nobody else serving, the members in their hold-down become
		// Ready at once; and a member's right to advertise a family
		// becomes Ready at once when no member that may advertise it
		// serves, if it has an established session of it (bgp.go).
		pool := others
		switch {
		case len(others) > 0:
		case len(drainers) > 0:
			pool = drainers
		default:
			pool = g.holdingDown()
		}
		cands = g.candGroups.in(pool, g.groupOf(vip))
		if g.obs.Advertised[vip] {
			cands = slices.DeleteFunc(cands, func(c string) bool {
				return !g.candBGP.mayAdvertise(c, vip) && !slices.Contains(g.peers[c].Sessions, familyOf(vip))
			})
		}
	}
	return Owner(vip, cands)
}

// sessions are the families of this host's established BGP sessions,
// sorted; g.mu is held.
func (g *Gossip) sessions() []string {
	out := []string{}
	for _, f := range families {
		if slices.Contains(g.obs.Sessions, f) {
			out = append(out, f)
		}
	}
	return out
}

// holdingDown are the members in their hold-down, sorted; g.mu is held.
func (g *Gossip) holdingDown() []string {
	var out []string
	for _, p := range g.peers {
		if p.State == StateHoldDown {
			out = append(out, p.Name)
		}
	}
	slices.Sort(out)
	return out
}

// Observe takes what the agent learned in a sync and updates this host's
// State at once, so that the Owns calls of the same sync see it.
func (g *Gossip) Observe(o Observation) {
	up, err := g.linkState(g.cfg.Interface)
	g.mu.Lock()
	g.obs = Observation{
		VIPs: slices.Clone(o.VIPs), DataPlaneErr: o.DataPlaneErr, NodesReachable: o.NodesReachable,
		Groups: o.Groups, MyGroups: slices.Clone(o.MyGroups),
		Advertised: o.Advertised, Sessions: slices.Clone(o.Sessions), Fresh: o.Fresh,
		Draining: o.Draining,
	}
	if len(g.obs.MyGroups) > MaxGroups {
		g.obs.MyGroups = g.obs.MyGroups[:MaxGroups]
	}
	g.observed = true
	g.vips = map[netip.Addr]bool{}
	for _, v := range o.VIPs {
		g.vips[v.Unmap()] = true
	}
	if err == nil {
		g.setLink(up)
	}
	for _, p := range o.Peers {
		if p != g.addr {
			g.known[p] = true
		}
	}
	g.apiHosts = slices.Clone(o.Hosts)
	g.apiMACs = map[string]string{}
	for _, h := range o.Hosts {
		if h.MAC != "" {
			g.apiMACs[h.MAC] = h.Name
		}
	}
	g.evaluate(time.Now())
	g.trackProbes()
	g.mu.Unlock()
	signal(g.kick)
	signal(g.probeKick)
}

// Status returns this host's standing.
func (g *Gossip) Status() Status {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := Status{State: g.state(), Problem: g.problem(), Address: g.addr, MAC: g.mac, Gossip: g.health, Solo: g.cfg.Solo}
	if g.probes != nil {
		st.InUse = slices.Collect(maps.Values(g.probes.reported))
		slices.SortFunc(st.InUse, func(a, b InUse) int { return a.VIP.Compare(b.VIP) })
	}
	return st
}

// setLink records whether the interface is up; g.mu is held.
func (g *Gossip) setLink(up bool) {
	g.linkBack = g.linkBack || up && !g.linkUp
	g.linkUp = up
}

// problem says why this host may not hold addresses; g.mu is held.
func (g *Gossip) problem() string {
	switch {
	case !g.observed:
		return "no data plane sync yet"
	case g.obs.DataPlaneErr != nil:
		return "data plane not programmed: " + g.obs.DataPlaneErr.Error()
	case !g.linkUp:
		return "interface " + g.cfg.Interface + " is down"
	case !g.obs.NodesReachable:
		return "no node answers its health check"
	}
	return ""
}

// evaluate updates this host's State and the owners; g.mu is held. It
// reports whether the owners changed.
func (g *Gossip) evaluate(now time.Time) bool {
	peers := make([]Member, 0, len(g.peers))
	for _, p := range g.peers {
		peers = append(peers, p)
	}
	window := presenceWindow(g.cfg.ConflictProbeInterval)
	forgetHeard(g.heard, now, window)
	if !g.cfg.Solo {
		// Alone, it has no peers (nobody to succeed it or to take a
		// drained address; hosts the API names and the link hears do
		// not count) and no gossip to be healthy or not.
		peers = append(peers, linkPeers(now, window, g.cfg.Name, g.apiMACs, g.heard, g.peers, g.gossiped)...)
		g.health = g.gerrs.health(now, unjoined(now, window, g.cfg.Name, g.apiMACs, g.heard, g.peers), g.hostOfIP, g.cfg.BindPort)
	}
	wasServing := g.ready.state == StateReady && g.drainSince.IsZero()
	g.ready.update(now, Health{Joined: g.joined, Problem: g.problem()}, peersOf(peers))
	g.bgp.update(now, g.joined, g.obs.Sessions, peers)
	draining := g.obs.Draining && g.ready.state == StateReady
	switch {
	case !draining:
		g.drainSince = time.Time{}
	case g.drainSince.IsZero() && wasServing:
		g.drainSince = now // it holds its share: a hand-over
	case g.drainSince.IsZero():
		g.drainSince = now.Add(-handOver) // Ready while cordoned: it holds nothing to hand over
	}
	yields := draining && !now.Before(g.drainSince.Add(handOver))
	g.yielded = yields
	selfState := g.ready.state
	if yields {
		selfState = StateDraining
	}
	cands := candidates(g.cfg.Name, selfState, peers)
	drainers := drainersOf(g.cfg.Name, yields, peers)
	groups := candidateGroups{g.cfg.Name: g.myGroups()}
	fams := candidateFamilies{g.cfg.Name: g.bgp.families()}
	for _, p := range peers {
		groups[p.Name] = p.Groups
		fams[p.Name] = p.BGP
	}
	changed := !slices.Equal(cands, g.cands) || !slices.Equal(drainers, g.drainers) || !groups.equal(g.candGroups) || !fams.equal(g.candBGP)
	g.cands, g.drainers, g.candGroups, g.candBGP = cands, drainers, groups, fams
	return changed
}

// wake is when evaluate must run again although nothing else changed
// (zero: never): the end of a hold-down; g.mu is held.
func (g *Gossip) wake() time.Time {
	w := g.ready.wake()
	for _, t := range []time.Time{g.bgp.wake(), g.drainWake()} {
		if w.IsZero() || !t.IsZero() && t.Before(w) {
			w = t
		}
	}
	return w
}

// drainWake is the end of this host's drain hand-over, while it runs
// (zero: none); g.mu is held.
func (g *Gossip) drainWake() time.Time {
	if !g.handingOver() {
		return time.Time{}
	}
	return g.drainSince.Add(handOver)
}

// handingOver: this host's drain hand-over runs (it is Ready, its Node
// cordoned, and it has not yielded yet); g.mu is held.
func (g *Gossip) handingOver() bool {
	return !g.drainSince.IsZero() && !g.yielded && g.obs.Draining && g.ready.state == StateReady
}

// Releasing reports whether this host holds vip only until it removes it
// in its drain hand-over: the others already hear it Draining, and one of
// them holds vip or is about to. It still owns vip (Owns), so that packets
// clients send here meanwhile are forwarded, but must neither announce it
// nor defend it: a client drawn back to this host's MAC just before it
// removes the address would send to a host that no longer forwards it
// until the client's neighbour entry is renewed, seconds later.
func (g *Gossip) Releasing(vip netip.Addr) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.releasing(vip.Unmap())
}

// releasing is Releasing; g.mu is held.
func (g *Gossip) releasing(vip netip.Addr) bool {
	if !g.handingOver() || g.owner(vip) != g.cfg.Name {
		return false
	}
	others := slices.DeleteFunc(slices.Clone(g.cands), func(c string) bool { return c == g.cfg.Name })
	return len(g.eligible(others, vip)) > 0
}

// state is the State this host publishes: its readiness, Draining while
// it is Ready and its Node cordoned; g.mu is held.
func (g *Gossip) state() State {
	if g.obs.Draining && g.ready.state == StateReady {
		return StateDraining
	}
	return g.ready.state
}

// Run gossips, keeps this host's State and watches for conflicts until ctx
// ends; then it leaves the gossip group, so that the others take over at
// once.
func (g *Gossip) Run(ctx context.Context, hooks Hooks) error {
	logger := klog.FromContext(ctx).WithName("membership")
	ctx = klog.NewContext(ctx, logger)
	if g.cfg.Solo {
		g.runSolo(ctx, hooks)
		return nil
	}
	ifc, err := resolveInterface(g.cfg.Interface, g.cfg.BindHost)
	if err != nil {
		return err
	}
	g.mu.Lock()
	g.addr = net.JoinHostPort(ifc.bind.String(), strconv.Itoa(g.cfg.BindPort))
	g.mac = ifc.mac.String()
	delete(g.known, g.addr)
	g.mu.Unlock()
	ml, err := memberlist.Create(g.memberlistConfig(ifc.bind, logger))
	if err != nil {
		return fmt.Errorf("start gossip on %s: %w", g.addr, err)
	}
	defer func() {
		// Leaving first: a member in its hold-down, with nobody else
		// serving, takes over at once rather than when its hold-down
		// ends (Successor counts on it).
		g.mu.Lock()
		g.leaving = true
		g.mu.Unlock()
		if err := ml.UpdateNode(time.Second); err != nil {
			logger.V(2).Info("Leaving not gossiped; the others see the leave itself", "err", err)
		}
		if err := ml.Leave(time.Second); err != nil {
			logger.Error(err, "Cannot announce leaving the gossip group; the others detect it")
		}
		_ = ml.Shutdown()
		logger.Info("Left the gossip group")
	}()
	logger.Info("Gossiping", "address", g.addr, "seeds", g.cfg.Seeds)

	if !g.waitObserved(ctx) {
		return nil
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	if ifc.mac != nil {
		// Listening from the start tells which hosts known from the API
		// serve before this host decides anything (see listenFirst).
		wg.Go(func() { g.guard(ctx, hooks, ifc) })
	} else {
		g.noGuard()
		logger.Info("Interface has no Ethernet address; split brains are not detected", "interface", g.cfg.Interface)
		hooks.Sync(false) // what waited for its probe is held now
	}
	g.initialJoin(ctx, ml)
	g.loop(ctx, ml, hooks)
	return nil
}

// waitObserved waits for the first Observe, which brings the peers found
// in the API: joining before that could make a restarted host believe it
// is alone.
func (g *Gossip) waitObserved(ctx context.Context) bool {
	for {
		g.mu.Lock()
		ok := g.observed
		g.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-g.kick:
		}
	}
}

// initialJoin tries every known address at once and waits for the answers
// (each bounded by the TCP timeout), then counts this host as joined.
func (g *Gossip) initialJoin(ctx context.Context, ml *memberlist.Memberlist) {
	var wg sync.WaitGroup
	for _, a := range g.joinTargets() {
		wg.Go(func() { g.join(ctx, ml, a) })
	}
	wg.Wait()
	g.listenFirst(ctx)
	g.mu.Lock()
	g.joined = true
	n := len(g.peers)
	g.mu.Unlock()
	klog.FromContext(ctx).Info("Joined the gossip group", "members", n+1)
	signal(g.kick)
}

// joinTargets are the known addresses that are neither members now nor
// being joined.
func (g *Gossip) joinTargets() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	member := map[string]bool{}
	for _, p := range g.peers {
		member[p.Addr] = true
	}
	var out []string
	for a := range g.known {
		if !member[a] && !g.joining[a] && a != g.addr {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return out
}

func (g *Gossip) join(ctx context.Context, ml *memberlist.Memberlist, addr string) {
	g.mu.Lock()
	g.joining[addr] = true
	g.mu.Unlock()
	_, err := ml.Join([]string{addr})
	g.mu.Lock()
	delete(g.joining, addr)
	g.mu.Unlock()
	if err != nil {
		g.gossipError(klog.FromContext(ctx), GossipErrorJoin, addr, err)
	}
}

// loop evaluates on every change and once a second, when it also rejoins
// known addresses that are not members (after a partition, memberlist
// alone never reconnects) and reads the interface's state. A lone host
// (Config.Solo) runs it with a nil ml: it tells nobody.
func (g *Gossip) loop(ctx context.Context, ml *memberlist.Memberlist, hooks Hooks) {
	logger := klog.FromContext(ctx)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var wake *time.Timer
	publishedGossip := GossipHealth{Reason: GossipHealthy, Message: "no gossip errors"}
	for {
		var wakeC <-chan time.Time
		g.mu.Lock()
		if w := g.wake(); !w.IsZero() {
			wake = time.NewTimer(time.Until(w))
			wakeC = wake.C
		}
		g.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-g.kick:
		case <-wakeC:
		case <-tick.C:
			if up, err := g.linkState(g.cfg.Interface); err == nil {
				g.mu.Lock()
				g.setLink(up)
				g.mu.Unlock()
			}
			if ml == nil {
				break // alone: nobody to join
			}
			for _, a := range g.joinTargets() {
				go g.join(ctx, ml, a)
			}
		}
		if wake != nil {
			wake.Stop()
			wake = nil
		}
		g.mu.Lock()
		changed := g.evaluate(time.Now())
		announce := g.newPeer
		g.newPeer = false
		state, groups, fams, sessions := g.state(), g.myGroups(), g.bgp.families(), g.sessions()
		// This host takes addresses over by what it publishes: it became
		// Ready, or may now advertise another BGP family or serve another
		// host group.
		gains := state == StateReady && (g.published != StateReady || adds(g.pubBGP, fams) || adds(g.pubGroups, groups))
		publish := state != g.published || !slices.Equal(groups, g.pubGroups) || !slices.Equal(fams, g.pubBGP) || !slices.Equal(sessions, g.pubSessions)
		g.published, g.pubGroups, g.pubBGP, g.pubSessions = state, groups, fams, sessions
		problem, cands, peers := g.problem(), slices.Clone(g.cands), len(g.peers)
		gossip, gossipChanged := g.health, g.health != publishedGossip
		publishedGossip = gossip
		linkBack := g.linkBack
		g.linkBack = false
		g.mu.Unlock()
		if linkBack {
			logger.Info("Interface is up again", "interface", g.cfg.Interface)
			if hooks.LinkUp != nil {
				hooks.LinkUp()
			}
		}
		if gossipChanged {
			logger.Info("Gossip health changed", "reason", gossip.Reason, "message", gossip.Message)
		}
		if publish {
			logger.Info("Member state changed", "state", state, "problem", problem, "bgpFamilies", fams, "owners", cands)
		}
		if changed {
			// A failover or a take-back: rare, and what an operator looks
			// for first when an address moved. A fresh address this host
			// now owns is probed at once.
			signal(g.probeKick)
			logger.Info("Owners changed", "owners", cands, "members", peers+1)
		} else if announce {
			logger.V(2).Info("New peer", "owners", cands, "members", peers+1)
		}
		switch {
		case gains && hooks.SyncWait != nil:
			// A host that takes addresses back (Ready after its hold-down
			// or a drain, a BGP family after its session's hold-down)
			// tells the others only once its sync has added (advertised)
			// them: they remove theirs when they hear it, so both hold
			// each for a moment and none is held by nobody. Bounded:
			// meanwhile this loop handles no failover.
			wctx, cancel := context.WithTimeout(ctx, readyWait)
			hooks.SyncWait(wctx, announce)
			if wctx.Err() != nil && ctx.Err() == nil {
				logger.Info("Telling the others this host is Ready before its sync ended", "waited", readyWait)
			}
			cancel()
		case changed || announce || gossipChanged || publish:
			hooks.Sync(announce) // this host's state and gossip health are reported in status
		}
		// UpdateNode waits for the broadcast to go out: the others hear
		// the new State now rather than up to a gossip interval later.
		if publish && ml != nil {
			if err := ml.UpdateNode(time.Second); err != nil {
				logger.V(2).Info("Member state not yet gossiped", "err", err)
			}
		}
		if ml != nil {
			g.recordMetrics()
		}
	}
}

// adds reports whether after has an element that before has not.
func adds(before, after []string) bool {
	for _, a := range after {
		if !slices.Contains(before, a) {
			return true
		}
	}
	return false
}

func (g *Gossip) memberlistConfig(bind netip.Addr, logger klog.Logger) *memberlist.Config {
	mc := memberlist.DefaultLANConfig()
	mc.Name = g.cfg.Name
	mc.BindAddr, mc.BindPort = bind.String(), g.cfg.BindPort
	mc.AdvertiseAddr, mc.AdvertisePort = bind.String(), g.cfg.BindPort
	mc.Label = "groundcloud-agent"
	mc.SecretKey = g.cfg.Key // GossipVerifyIncoming/Outgoing stay on: plain text is refused
	mc.ProbeInterval, mc.ProbeTimeout = g.cfg.ProbeInterval, g.cfg.ProbeTimeout
	mc.SuspicionMult = g.cfg.SuspicionMult
	mc.SuspicionMaxTimeoutMult = 3
	// Suspicions and deaths spread within a gossip round or two.
	mc.GossipInterval = g.cfg.ProbeInterval / 2
	mc.GossipToTheDeadTime = 10 * time.Second
	mc.PushPullInterval = 15 * time.Second
	mc.TCPTimeout = 2 * time.Second
	// A host back with another address is accepted after this long.
	mc.DeadNodeReclaimTime = 5 * time.Second
	mc.Delegate = delegate{g}
	mc.Events = events{g}
	mc.Logger = newStdLogger(logger, func(from string) { g.gossipError(logger, GossipErrorDecrypt, from, nil) })
	return mc
}

// delegate gives memberlist this host's metadata.
type delegate struct{ g *Gossip }

func (d delegate) NodeMeta(int) []byte {
	d.g.mu.Lock()
	defer d.g.mu.Unlock()
	fams, sessions := encodeFamilies(d.g.bgp.families()), encodeFamilies(d.g.sessions())
	state := d.g.state()
	if d.g.leaving {
		state, fams, sessions = StateLeaving, "", ""
	}
	return encodeMeta(meta{State: state, MAC: d.g.mac, Groups: d.g.myGroups(), BGP: &fams, Sessions: &sessions})
}
func (delegate) NotifyMsg([]byte)                {}
func (delegate) GetBroadcasts(int, int) [][]byte { return nil }
func (delegate) LocalState(bool) []byte          { return nil }
func (delegate) MergeRemoteState([]byte, bool)   {}

// events keeps the member view. memberlist calls it under its own locks:
// it must not call memberlist.
type events struct{ g *Gossip }

func (e events) NotifyJoin(n *memberlist.Node)   { e.g.memberUp(n, true) }
func (e events) NotifyUpdate(n *memberlist.Node) { e.g.memberUp(n, false) }
func (e events) NotifyLeave(n *memberlist.Node)  { e.g.memberDown(n) }

func (g *Gossip) memberUp(n *memberlist.Node, joined bool) {
	if n.Name == g.cfg.Name {
		return
	}
	m, err := decodeMeta(n.Meta)
	addr := net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
	g.mu.Lock()
	if err != nil {
		klog.Background().V(2).Info("Member with unreadable metadata is never an owner", "member", n.Name, "err", err)
	}
	member := Member{Name: n.Name, State: m.State, MAC: m.MAC, Addr: addr, Groups: m.Groups}
	if m.BGP != nil {
		member.BGP = decodeFamilies(*m.BGP)
	}
	if m.Sessions != nil {
		member.Sessions = decodeFamilies(*m.Sessions)
	}
	g.peers[n.Name] = member
	g.gossiped[n.Name] = true
	if m.MAC != "" {
		g.macs[m.MAC] = n.Name
	}
	g.known[addr] = true
	g.newPeer = g.newPeer || joined
	g.mu.Unlock()
	signal(g.kick)
}

func (g *Gossip) memberDown(n *memberlist.Node) {
	g.mu.Lock()
	delete(g.peers, n.Name)
	g.mu.Unlock()
	signal(g.kick)
}

// signal wakes the receiver of a capacity-1 channel without blocking.
func signal(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

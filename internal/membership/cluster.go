package membership

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
	"k8s.io/klog/v2"
)

// Config is what a Cluster needs; Options.Config builds it.
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
}

// Hooks are how a Cluster tells its agent what to do. They are called from
// the Cluster's goroutines and must not block.
type Hooks struct {
	// Sync: ownership may have changed; announce: also announce every held
	// address again after the sync (a member came back, and another host may
	// have announced addresses this host holds).
	Sync func(announce bool)
	// Announce every held address again now (defending against another
	// host that answers for one).
	Announce func()
	// Conflict reports a split brain that started, changed or ended.
	Conflict func(Conflict)
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
}

// Cluster is this host's membership among the agents sharing the virtual
// IPs: it gossips with them (hashicorp/memberlist), decides this host's
// State, tells which addresses it owns and watches the link for another
// host answering for them. New only constructs; Run does the work.
type Cluster struct {
	cfg       Config
	kick      chan struct{}              // capacity 1: evaluate again
	linkState func(string) (bool, error) // linkIsUp; tests replace it

	mu         sync.Mutex
	observed   bool
	obs        Observation
	vips       map[netip.Addr]bool // obs.VIPs, unmapped
	linkUp     bool
	linkBack   bool // the link came up since the loop last looked
	joined     bool
	ready      *readiness
	published  State             // the State others were last told
	peers      map[string]Member // alive (or suspect) members but this host, by name
	macs       map[string]string // MAC -> member name, of every member ever seen
	known      map[string]bool   // gossip addresses to join when they are not members
	joining    map[string]bool   // joins in flight
	cands      []string          // members that own addresses, sorted
	candGroups candidateGroups   // the groups of each of cands
	pubGroups  []string          // the groups others were last told
	suppressed map[netip.Addr]bool
	conflicts  *conflicts
	addr       string // our gossip address, host:port
	mac        string
	newPeer    bool // a member joined since the last evaluation

	apiHosts    []Host               // obs.Hosts
	apiMACs     map[string]string    // MAC -> host, from apiHosts
	heard       map[string]time.Time // MAC -> last time it claimed a VIP on the link
	gossiped    map[string]bool      // members ever seen in gossip, by name
	listenSince time.Time            // when the guard started listening (zero: not yet)
	guardOff    bool                 // the guard does not run: nothing is heard
	gerrs       *gossipErrors
	gossip      GossipHealth // at the last evaluation
}

// New returns a Cluster; it touches nothing until Run.
func New(cfg Config) *Cluster {
	c := &Cluster{
		cfg:        cfg,
		kick:       make(chan struct{}, 1),
		linkState:  linkIsUp,
		ready:      newReadiness(cfg.HoldDown),
		published:  StateStarting,
		peers:      map[string]Member{},
		macs:       map[string]string{},
		known:      map[string]bool{},
		joining:    map[string]bool{},
		suppressed: map[netip.Addr]bool{},
		conflicts:  newConflicts(cfg.ConflictProbeInterval),
		linkUp:     true,
		apiMACs:    map[string]string{},
		heard:      map[string]time.Time{},
		gossiped:   map[string]bool{},
		gerrs:      newGossipErrors(),
		gossip:     GossipHealth{Reason: GossipHealthy, Message: "no gossip errors"},
	}
	for _, s := range cfg.Seeds {
		c.known[s] = true
	}
	return c
}

// Owns reports whether this host holds vip now: it is Ready, rendezvous
// hashing over the Ready members gives it vip, and it does not yield vip
// in a split brain.
func (c *Cluster) Owns(vip netip.Addr) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	vip = vip.Unmap()
	return !c.suppressed[vip] && c.owner(vip) == c.cfg.Name
}

// owner is the owner of vip among the candidates of its group; c.mu is held.
func (c *Cluster) owner(vip netip.Addr) string {
	return Owner(vip, c.candGroups.in(c.cands, c.groupOf(vip.Unmap())))
}

// Observe takes what the agent learned in a sync and updates this host's
// State at once, so that the Owns calls of the same sync see it.
func (c *Cluster) Observe(o Observation) {
	up, err := c.linkState(c.cfg.Interface)
	c.mu.Lock()
	c.obs = Observation{
		VIPs: slices.Clone(o.VIPs), DataPlaneErr: o.DataPlaneErr, NodesReachable: o.NodesReachable,
		Groups: o.Groups, MyGroups: slices.Clone(o.MyGroups),
	}
	if len(c.obs.MyGroups) > MaxGroups {
		c.obs.MyGroups = c.obs.MyGroups[:MaxGroups]
	}
	c.observed = true
	c.vips = map[netip.Addr]bool{}
	for _, v := range o.VIPs {
		c.vips[v.Unmap()] = true
	}
	if err == nil {
		c.setLink(up)
	}
	for _, p := range o.Peers {
		if p != c.addr {
			c.known[p] = true
		}
	}
	c.apiHosts = slices.Clone(o.Hosts)
	c.apiMACs = map[string]string{}
	for _, h := range o.Hosts {
		if h.MAC != "" {
			c.apiMACs[h.MAC] = h.Name
		}
	}
	c.evaluate(time.Now())
	c.mu.Unlock()
	signal(c.kick)
}

// Status returns this host's standing.
func (c *Cluster) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Status{State: c.ready.state, Problem: c.problem(), Address: c.addr, MAC: c.mac, Gossip: c.gossip}
}

// setLink records whether the interface is up; c.mu is held.
func (c *Cluster) setLink(up bool) {
	c.linkBack = c.linkBack || up && !c.linkUp
	c.linkUp = up
}

// problem says why this host may not hold addresses; c.mu is held.
func (c *Cluster) problem() string {
	switch {
	case !c.observed:
		return "no data plane sync yet"
	case c.obs.DataPlaneErr != nil:
		return "data plane not programmed: " + c.obs.DataPlaneErr.Error()
	case !c.linkUp:
		return "interface " + c.cfg.Interface + " is down"
	case !c.obs.NodesReachable:
		return "no node answers its health check"
	}
	return ""
}

// evaluate updates this host's State and the owners; c.mu is held. It
// reports whether the owners changed.
func (c *Cluster) evaluate(now time.Time) bool {
	peers := make([]Member, 0, len(c.peers))
	for _, p := range c.peers {
		peers = append(peers, p)
	}
	window := presenceWindow(c.cfg.ConflictProbeInterval)
	forgetHeard(c.heard, now, window)
	peers = append(peers, linkPeers(now, window, c.cfg.Name, c.apiMACs, c.heard, c.peers, c.gossiped)...)
	c.gossip = c.gerrs.health(now, unjoined(now, window, c.cfg.Name, c.apiMACs, c.heard, c.peers), c.hostOfIP, c.cfg.BindPort)
	c.ready.update(now, Health{Joined: c.joined, Problem: c.problem()}, peersOf(peers))
	cands := candidates(c.cfg.Name, c.ready.state, peers)
	groups := candidateGroups{c.cfg.Name: c.myGroups()}
	for _, p := range peers {
		groups[p.Name] = p.Groups
	}
	changed := !slices.Equal(cands, c.cands) || !groups.equal(c.candGroups)
	c.cands, c.candGroups = cands, groups
	return changed
}

// Run gossips, keeps this host's State and watches for conflicts until ctx
// ends; then it leaves the cluster, so that the others take over at once.
func (c *Cluster) Run(ctx context.Context, hooks Hooks) error {
	logger := klog.FromContext(ctx).WithName("membership")
	ctx = klog.NewContext(ctx, logger)
	ifc, err := resolveInterface(c.cfg.Interface, c.cfg.BindHost)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.addr = net.JoinHostPort(ifc.bind.String(), strconv.Itoa(c.cfg.BindPort))
	c.mac = ifc.mac.String()
	delete(c.known, c.addr)
	c.mu.Unlock()
	ml, err := memberlist.Create(c.memberlistConfig(ifc.bind, logger))
	if err != nil {
		return fmt.Errorf("start gossip on %s: %w", c.addr, err)
	}
	defer func() {
		if err := ml.Leave(time.Second); err != nil {
			logger.Error(err, "Cannot announce leaving the cluster; the others detect it")
		}
		_ = ml.Shutdown()
		logger.Info("Left the cluster")
	}()
	logger.Info("Gossiping", "address", c.addr, "seeds", c.cfg.Seeds)

	if !c.waitObserved(ctx) {
		return nil
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	if ifc.mac != nil {
		// Listening from the start tells which hosts known from the API
		// serve before this host decides anything (see listenFirst).
		wg.Go(func() { c.guard(ctx, hooks, ifc) })
	} else {
		c.mu.Lock()
		c.guardOff = true
		c.mu.Unlock()
		logger.Info("Interface has no Ethernet address; split brains are not detected", "interface", c.cfg.Interface)
	}
	c.initialJoin(ctx, ml)
	c.loop(ctx, ml, hooks)
	return nil
}

// waitObserved waits for the first Observe, which brings the peers found
// in the API: joining before that could make a restarted host believe it
// is alone.
func (c *Cluster) waitObserved(ctx context.Context) bool {
	for {
		c.mu.Lock()
		ok := c.observed
		c.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-c.kick:
		}
	}
}

// initialJoin tries every known address at once and waits for the answers
// (each bounded by the TCP timeout), then counts this host as joined.
func (c *Cluster) initialJoin(ctx context.Context, ml *memberlist.Memberlist) {
	var wg sync.WaitGroup
	for _, a := range c.joinTargets() {
		wg.Go(func() { c.join(ctx, ml, a) })
	}
	wg.Wait()
	c.listenFirst(ctx)
	c.mu.Lock()
	c.joined = true
	n := len(c.peers)
	c.mu.Unlock()
	klog.FromContext(ctx).Info("Joined the cluster", "members", n+1)
	signal(c.kick)
}

// joinTargets are the known addresses that are neither members now nor
// being joined.
func (c *Cluster) joinTargets() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	member := map[string]bool{}
	for _, p := range c.peers {
		member[p.Addr] = true
	}
	var out []string
	for a := range c.known {
		if !member[a] && !c.joining[a] && a != c.addr {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return out
}

func (c *Cluster) join(ctx context.Context, ml *memberlist.Memberlist, addr string) {
	c.mu.Lock()
	c.joining[addr] = true
	c.mu.Unlock()
	_, err := ml.Join([]string{addr})
	c.mu.Lock()
	delete(c.joining, addr)
	c.mu.Unlock()
	if err != nil {
		c.gossipError(klog.FromContext(ctx), GossipErrorJoin, addr, err)
	}
}

// loop evaluates on every change and once a second, when it also rejoins
// known addresses that are not members (after a partition, memberlist
// alone never reconnects) and reads the interface's state.
func (c *Cluster) loop(ctx context.Context, ml *memberlist.Memberlist, hooks Hooks) {
	logger := klog.FromContext(ctx)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var wake *time.Timer
	publishedGossip := GossipHealth{Reason: GossipHealthy, Message: "no gossip errors"}
	for {
		var wakeC <-chan time.Time
		c.mu.Lock()
		if w := c.ready.wake(); !w.IsZero() {
			wake = time.NewTimer(time.Until(w))
			wakeC = wake.C
		}
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-c.kick:
		case <-wakeC:
		case <-tick.C:
			if up, err := c.linkState(c.cfg.Interface); err == nil {
				c.mu.Lock()
				c.setLink(up)
				c.mu.Unlock()
			}
			for _, a := range c.joinTargets() {
				go c.join(ctx, ml, a)
			}
		}
		if wake != nil {
			wake.Stop()
			wake = nil
		}
		c.mu.Lock()
		changed := c.evaluate(time.Now())
		announce := c.newPeer
		c.newPeer = false
		state, publish := c.ready.state, c.ready.state != c.published || !slices.Equal(c.myGroups(), c.pubGroups)
		c.published, c.pubGroups = state, c.myGroups()
		problem, cands, peers := c.problem(), slices.Clone(c.cands), len(c.peers)
		gossip, gossipChanged := c.gossip, c.gossip != publishedGossip
		publishedGossip = gossip
		linkBack := c.linkBack
		c.linkBack = false
		c.mu.Unlock()
		if linkBack {
			logger.Info("Interface is up again", "interface", c.cfg.Interface)
			if hooks.LinkUp != nil {
				hooks.LinkUp()
			}
		}
		if gossipChanged {
			logger.Info("Gossip health changed", "reason", gossip.Reason, "message", gossip.Message)
		}
		if publish {
			logger.Info("Member state changed", "state", state, "problem", problem, "owners", cands)
			if err := ml.UpdateNode(time.Second); err != nil {
				logger.V(2).Info("Member state not yet gossiped", "err", err)
			}
		}
		if changed {
			// A failover or a take-back: rare, and what an operator looks
			// for first when an address moved.
			logger.Info("Owners changed", "owners", cands, "members", peers+1)
		} else if announce {
			logger.V(2).Info("New peer", "owners", cands, "members", peers+1)
		}
		if changed || announce || gossipChanged || publish {
			hooks.Sync(announce) // this host's state and gossip health are reported in status
		}
		c.recordMetrics()
	}
}

func (c *Cluster) memberlistConfig(bind netip.Addr, logger klog.Logger) *memberlist.Config {
	mc := memberlist.DefaultLANConfig()
	mc.Name = c.cfg.Name
	mc.BindAddr, mc.BindPort = bind.String(), c.cfg.BindPort
	mc.AdvertiseAddr, mc.AdvertisePort = bind.String(), c.cfg.BindPort
	mc.Label = "groundcloud-agent"
	mc.SecretKey = c.cfg.Key // GossipVerifyIncoming/Outgoing stay on: plain text is refused
	mc.ProbeInterval, mc.ProbeTimeout = c.cfg.ProbeInterval, c.cfg.ProbeTimeout
	mc.SuspicionMult = c.cfg.SuspicionMult
	mc.SuspicionMaxTimeoutMult = 3
	// Suspicions and deaths spread within a gossip round or two.
	mc.GossipInterval = c.cfg.ProbeInterval / 2
	mc.GossipToTheDeadTime = 10 * time.Second
	mc.PushPullInterval = 15 * time.Second
	mc.TCPTimeout = 2 * time.Second
	// A host back with another address is accepted after this long.
	mc.DeadNodeReclaimTime = 5 * time.Second
	mc.Delegate = delegate{c}
	mc.Events = events{c}
	mc.Logger = newStdLogger(logger, func(from string) { c.gossipError(logger, GossipErrorDecrypt, from, nil) })
	return mc
}

// delegate gives memberlist this host's metadata.
type delegate struct{ c *Cluster }

func (d delegate) NodeMeta(int) []byte {
	d.c.mu.Lock()
	defer d.c.mu.Unlock()
	return encodeMeta(meta{State: d.c.ready.state, MAC: d.c.mac, Groups: d.c.myGroups()})
}
func (delegate) NotifyMsg([]byte)                {}
func (delegate) GetBroadcasts(int, int) [][]byte { return nil }
func (delegate) LocalState(bool) []byte          { return nil }
func (delegate) MergeRemoteState([]byte, bool)   {}

// events keeps the member view. memberlist calls it under its own locks:
// it must not call memberlist.
type events struct{ c *Cluster }

func (e events) NotifyJoin(n *memberlist.Node)   { e.c.memberUp(n, true) }
func (e events) NotifyUpdate(n *memberlist.Node) { e.c.memberUp(n, false) }
func (e events) NotifyLeave(n *memberlist.Node)  { e.c.memberDown(n) }

func (c *Cluster) memberUp(n *memberlist.Node, joined bool) {
	if n.Name == c.cfg.Name {
		return
	}
	m, err := decodeMeta(n.Meta)
	addr := net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
	c.mu.Lock()
	if err != nil {
		klog.Background().V(2).Info("Member with unreadable metadata is never an owner", "member", n.Name, "err", err)
	}
	c.peers[n.Name] = Member{Name: n.Name, State: m.State, MAC: m.MAC, Addr: addr, Groups: m.Groups}
	c.gossiped[n.Name] = true
	if m.MAC != "" {
		c.macs[m.MAC] = n.Name
	}
	c.known[addr] = true
	c.newPeer = c.newPeer || joined
	c.mu.Unlock()
	signal(c.kick)
}

func (c *Cluster) memberDown(n *memberlist.Node) {
	c.mu.Lock()
	delete(c.peers, n.Name)
	c.mu.Unlock()
	signal(c.kick)
}

// signal wakes the receiver of a capacity-1 channel without blocking.
func signal(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

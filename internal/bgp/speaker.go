package bgp

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	api "github.com/osrg/gobgp/v3/api"
	"github.com/osrg/gobgp/v3/pkg/apiutil"
	"github.com/osrg/gobgp/v3/pkg/packet/bgp"
	"github.com/osrg/gobgp/v3/pkg/server"
	"k8s.io/klog/v2"

	"github.com/groundcloud/groundcloud/internal/bfd"
)

// Peer is one router this host has a session with.
type Peer struct {
	Name          string
	Address       netip.Addr
	ASN, LocalASN uint32
	Port          int32
	// Password is the TCP-MD5 password ("" none); never logged.
	Password                string
	HoldTime, KeepaliveTime time.Duration
	SourceAddress           netip.Addr // invalid: the kernel's choice
	Multihop                int        // 0: directly connected
	Passive                 bool
	Families                []string // "ipv4", "ipv6"
	// BFD, when set, runs a BFD session with the peer with these timers;
	// it going down resets the BGP session.
	BFD *bfd.Settings
	// GracefulRestart, when not 0, negotiates graceful restart (RFC 4724)
	// with the peer, with this Restart Time: the peer keeps this host's
	// routes while its speaker restarts (see Speaker.Keep and
	// Speaker.Restarting).
	GracefulRestart time.Duration
}

// Config is what a Speaker needs.
type Config struct {
	// RouterID is this host's BGP identifier (an IPv4 address).
	RouterID netip.Addr
	Peers    []Peer
	// WithdrawWait is how long Run waits after withdrawing every route
	// before it stops the sessions and returns, while the data plane
	// still forwards: the routers' time to move the traffic.
	WithdrawWait time.Duration
	// ListenPort is the TCP port passive peers connect to; 0: BGP's, 179.
	ListenPort int32
	// SessionChanged is told when a session becomes established (up) or
	// stops being so; nil: nobody is.
	SessionChanged func(peer Peer, up bool, state string)
	// PeerFailed is told of a peer the speaker runs no session with: a
	// passive one while the speaker cannot listen, or one GoBGP refused.
	// The other peers' sessions carry on. nil: nobody is.
	PeerFailed func(peer Peer, err error)
	// BFDChanged is told of each state change of a peer's BFD session;
	// nil: nobody is.
	BFDChanged func(peer Peer, c bfd.Change)
	// BFDFailed is told when the BFD sessions cannot run (the BFD port is
	// taken, say): the BGP sessions run without them. nil: nobody is.
	BFDFailed func(peers []Peer, err error)
	// RestartWait bounds how long a restarting speaker (Restarting) waits
	// for the routes it advertised before it connects to its peers; 0:
	// DefaultRestartWait.
	RestartWait time.Duration
}

// DefaultRestartWait is RestartWait's default.
const DefaultRestartWait = 15 * time.Second

// deferralTime is the seconds a restarting speaker waits for its peers'
// End-of-RIB markers before it sends its routes anyway (RFC 4724's
// Selection_Deferral_Timer).
const deferralTime = 10

// bgpServer is what the speaker uses of GoBGP's *server.BgpServer.
type bgpServer interface {
	StartBgp(ctx context.Context, r *api.StartBgpRequest) error
	StopBgp(ctx context.Context, r *api.StopBgpRequest) error
	WatchEvent(ctx context.Context, r *api.WatchEventRequest, fn func(*api.WatchEventResponse)) error
	AddPeer(ctx context.Context, r *api.AddPeerRequest) error
	AddPath(ctx context.Context, r *api.AddPathRequest) (*api.AddPathResponse, error)
	DeletePath(ctx context.Context, r *api.DeletePathRequest) error
	ResetPeer(ctx context.Context, r *api.ResetPeerRequest) error
}

// Speaker advertises the routes it is given to every peer. New only
// constructs; Run runs GoBGP.
type Speaker struct {
	cfg  Config
	kick chan struct{}

	mu   sync.Mutex
	want []Route
	up   map[string]bool // established sessions, by peer name
	// offered are the routes GoBGP holds to advertise; the peers whose
	// session is up hear those of their families.
	offered []Route
	// restarting: the speaker starts as a restarting speaker (Restarting),
	// and connects once Set has given every prefix of restartWant.
	restarting  bool
	restartWant []netip.Prefix
	// keep are the routes the peers keep when Run ends (Keep); nil:
	// every route is withdrawn first.
	keep map[netip.Prefix]bool
	// handOver are the routes another host advertises next (HandOver):
	// withdrawn last, the hand-over wait after the others.
	handOver map[netip.Prefix]bool

	// Run's own: why GoBGP does not listen (nil: it does, or need not),
	// and whether the peers were added.
	listenErr error
	added     bool
}

// New returns a Speaker; it touches nothing until Run.
func New(cfg Config) *Speaker {
	return &Speaker{cfg: cfg, kick: make(chan struct{}, 1), up: map[string]bool{}}
}

// Set makes routes what the speaker advertises (applied by Run); it
// does not block.
func (s *Speaker) Set(routes []Route) {
	s.mu.Lock()
	s.want = routes
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Restarting makes Run start as a restarting speaker (RFC 4724), as
// after a predecessor that stopped with Keep (or crashed) while the
// routers helped with graceful restart: the sessions of the peers with
// GracefulRestart open with the Restart State and Forwarding State bits,
// so that such a router keeps the routes it holds from this host until
// the speaker's End-of-RIB replaces them. The speaker connects to its
// peers only once Set has given it every prefix of want (what this host
// advertised before, as far as the caller knows) or after RestartWait,
// so that the End-of-RIB comes after the routes, not before them. Call
// before Run.
func (s *Speaker) Restarting(want []netip.Prefix) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.restarting, s.restartWant = true, slices.Clone(want)
}

// Keep makes Run end without withdrawing the routes for prefixes and
// without closing the sessions: the agent restarts while no other host
// advertises them, and the routers that help with graceful restart keep
// them, as stale, until the next speaker has advertised them again
// (Restarting). The sessions close when the process ends, without a
// NOTIFICATION, which is what starts the router's help. Routes not in
// prefixes are withdrawn as always. Call before Run's context ends; an
// empty prefixes is the ordinary stop.
func (s *Speaker) Keep(prefixes []netip.Prefix) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keep = nil
	if len(prefixes) > 0 {
		s.keep = map[netip.Prefix]bool{}
		for _, p := range prefixes {
			s.keep[p] = true
		}
	}
}

// HandOver names the routes that another host starts advertising once
// this one has left (the elected host of a proxy address): when Run ends
// it advertises them again with a MED (handOverMED), which makes the next
// host's route, once it comes, the routers' only best path, and withdraws
// them the hand-over wait later (make before break: withdrawn at once, a
// route was missing for 0.2 s at the router; kept as they were, the
// router split the flows between both hosts for as long and the replies
// of half of them reached the wrong one). Call before Run's context ends.
func (s *Speaker) HandOver(prefixes []netip.Prefix) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handOver = map[netip.Prefix]bool{}
	for _, p := range prefixes {
		s.handOver[p] = true
	}
}

// GracefulRestart reports whether some peer negotiates graceful restart.
func (s *Speaker) GracefulRestart() bool {
	return slices.ContainsFunc(s.cfg.Peers, func(p Peer) bool { return p.GracefulRestart > 0 })
}

// Advertised returns those of routes that an established session
// carries (a session of the route's family): what the routers hear from
// this host, once Run has applied routes.
func (s *Speaker) Advertised(routes []Route) []Route {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Carried(routes, s.cfg.Peers, s.up)
}

// Established returns the names of the peers whose session is established.
func (s *Speaker) Established() map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]bool, len(s.up))
	for k, v := range s.up {
		out[k] = v
	}
	return out
}

// Run starts GoBGP and the sessions and advertises what Set says until
// ctx ends; then it withdraws every route, waits WithdrawWait and stops
// the sessions. A peer that cannot work (PeerFailed) leaves the others
// alone; Run fails only when GoBGP cannot start at all.
func (s *Speaker) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("bgp")
	var secrets []string
	for _, p := range s.cfg.Peers {
		secrets = append(secrets, p.Password)
		sessionUp.WithLabelValues(p.Name).Set(0) // down until established, also when GoBGP cannot start
	}
	srv := server.NewBgpServer(server.LoggerOption(gobgpLogger{logger: logger, secrets: secrets}))
	go srv.Serve()
	kept := false
	defer func() {
		if !kept {
			srv.Stop()
		}
	}()
	lctx := klog.NewContext(ctx, logger)
	if err := s.start(lctx, srv); err != nil {
		return err
	}
	s.mu.Lock()
	restarting, restartWant := s.restarting, s.restartWant
	s.mu.Unlock()
	var wait <-chan time.Time
	if restarting {
		d := s.cfg.RestartWait
		if d == 0 {
			d = DefaultRestartWait
		}
		logger.Info("BGP speaker restarting: connecting once the routes it advertised are back", "routes", len(restartWant), "wait", d)
		wait = time.After(d)
	} else {
		s.addPeers(lctx, srv, false)
	}
	logger.Info("BGP speaker running", "routerID", s.cfg.RouterID, "peers", len(s.cfg.Peers))
	// BFD stops after the BGP sessions (deferred calls run after
	// shutdown): the routers hear AdminDown once the routes are gone. Not
	// when routes are kept: BFD then goes on until the process ends, after
	// its BGP sessions (the router would take AdminDown while the sessions
	// are up for a reason to drop them).
	stopBFD := s.runBFD(ctx, logger, srv)
	defer func() {
		if !kept {
			stopBFD()
		}
	}()
	have := map[netip.Prefix]Route{}
	for {
		select {
		case <-ctx.Done():
			var err error
			kept, err = s.shutdown(logger, srv, have)
			return err
		case <-wait:
			logger.Info("BGP speaker restarting: connecting without every route it advertised before", "routes", len(have), "wanted", len(restartWant))
			s.addPeers(lctx, srv, true)
			restarting, wait = false, nil
		case <-s.kick:
			s.mu.Lock()
			want := s.want
			s.mu.Unlock()
			if err := s.apply(ctx, srv, have, want); err != nil {
				logger.Error(err, "Cannot update advertised routes")
			}
			if restarting && covers(have, restartWant) {
				s.addPeers(lctx, srv, true)
				restarting, wait = false, nil
			}
		}
	}
}

// covers reports whether have holds a route for every prefix of want.
func covers(have map[netip.Prefix]Route, want []netip.Prefix) bool {
	for _, p := range want {
		if _, ok := have[p]; !ok {
			return false
		}
	}
	return true
}

// start starts GoBGP, listening for passive peers when there are any,
// and adds the peers. When it cannot listen (port 179 needs
// CAP_NET_BIND_SERVICE) it starts without listening: the active peers
// connect all the same, and only the passive ones fail.
func (s *Speaker) start(ctx context.Context, srv bgpServer) error {
	listenErr, err := s.startBGP(ctx, srv)
	if err != nil {
		return err
	}
	logger := klog.FromContext(ctx)
	if err := srv.WatchEvent(ctx, &api.WatchEventRequest{Peer: &api.WatchEventRequest_Peer{}}, func(r *api.WatchEventResponse) { s.peerEvent(logger, r) }); err != nil {
		return fmt.Errorf("watch BGP peers: %w", err)
	}
	s.listenErr = listenErr
	return nil
}

// addPeers adds the peers to GoBGP, those with graceful restart as a
// restarting speaker's when restarting; once.
func (s *Speaker) addPeers(ctx context.Context, srv bgpServer, restarting bool) {
	if s.added {
		return
	}
	s.added = true
	logger := klog.FromContext(ctx)
	for _, p := range s.cfg.Peers {
		if p.Passive && s.listenErr != nil {
			s.peerFailed(logger, p, s.listenErr)
			continue
		}
		if err := srv.AddPeer(ctx, &api.AddPeerRequest{Peer: apiPeer(p, restarting)}); err != nil {
			s.peerFailed(logger, p, fmt.Errorf("GoBGP refused the peer: %w", err))
		}
	}
}

// startBGP starts GoBGP. When it cannot listen it starts it without
// listening and returns why (listenErr); err: GoBGP did not start.
func (s *Speaker) startBGP(ctx context.Context, srv bgpServer) (listenErr, err error) {
	global := &api.Global{RouterId: s.cfg.RouterID.String(), ListenPort: s.listenPort()}
	if len(s.cfg.Peers) > 0 {
		global.Asn = s.cfg.Peers[0].LocalASN
	}
	err = srv.StartBgp(ctx, &api.StartBgpRequest{Global: global})
	if err == nil || global.ListenPort < 0 {
		return nil, wrapStart(err)
	}
	listenErr = fmt.Errorf("cannot listen on TCP port %d for the router to connect (binding a port below 1024 needs CAP_NET_BIND_SERVICE): %w", global.ListenPort, err)
	_ = srv.StopBgp(ctx, &api.StopBgpRequest{}) // closes what it could bind
	global.ListenPort = -1
	if err := srv.StartBgp(ctx, &api.StartBgpRequest{Global: global}); err != nil {
		return nil, wrapStart(errors.Join(listenErr, err))
	}
	return listenErr, nil
}

func wrapStart(err error) error {
	if err != nil {
		return fmt.Errorf("start BGP: %w", err)
	}
	return nil
}

// listenPort is the port GoBGP listens on: ListenPort (179) when a peer
// is passive; -1, not at all, when every peer is active.
func (s *Speaker) listenPort() int32 {
	for _, p := range s.cfg.Peers {
		if !p.Passive {
			continue
		}
		if s.cfg.ListenPort != 0 {
			return s.cfg.ListenPort
		}
		return bgp.BGP_PORT
	}
	return -1
}

// peerFailed logs that the speaker runs no session with p, and says so to
// PeerFailed; p's session stays down in the metrics.
func (s *Speaker) peerFailed(logger klog.Logger, p Peer, err error) {
	logger.Error(err, "No BGP session with this peer; the other peers are unaffected", "peer", p.Name, "address", p.Address)
	if s.cfg.PeerFailed != nil {
		s.cfg.PeerFailed(p, err)
	}
}

// runBFD starts the BFD sessions of the peers that ask for them and
// returns what stops them (sending AdminDown) and waits for that; a
// failure to start them is logged and told to BFDFailed, and the BGP
// sessions run without.
func (s *Speaker) runBFD(ctx context.Context, logger klog.Logger, srv bgpServer) (stop func()) {
	var peers []bfd.Peer
	var with []Peer
	byName := map[string]Peer{}
	for _, p := range s.cfg.Peers {
		if p.BFD != nil {
			peers = append(peers, bfd.Peer{Name: p.Name, Remote: p.Address, Local: p.SourceAddress, Settings: *p.BFD})
			with = append(with, p)
			byName[p.Name] = p
		}
	}
	if len(peers) == 0 {
		return func() {}
	}
	bfd.RegisterMetrics()
	r, err := bfd.Listen(bfd.Config{Peers: peers, Changed: func(bp bfd.Peer, c bfd.Change) {
		s.bfdChanged(ctx, logger, srv, byName[bp.Name], c)
	}})
	if err != nil {
		logger.Error(err, "No BFD sessions; the BGP sessions run without them", "peers", len(peers))
		if s.cfg.BFDFailed != nil {
			s.cfg.BFDFailed(with, err)
		}
		return func() {}
	}
	bctx, cancel := context.WithCancel(klog.NewContext(context.WithoutCancel(ctx), logger))
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(bctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// bfdChanged resets p's BGP session when its BFD session failed
// (Failed): the router does the same on its side, so both drop the routes
// at once instead of after the hold time.
func (s *Speaker) bfdChanged(ctx context.Context, logger klog.Logger, srv bgpServer, p Peer, c bfd.Change) {
	if s.cfg.BFDChanged != nil {
		s.cfg.BFDChanged(p, c)
	}
	if !Failed(c) {
		return
	}
	logger.Info("BFD session down: resetting the BGP session", "peer", p.Name, "address", p.Address, "diagnostic", c.Diag.String())
	err := srv.ResetPeer(ctx, &api.ResetPeerRequest{Address: p.Address.String(), Communication: "BFD session down: " + c.Diag.String()})
	if err != nil {
		logger.Error(err, "Cannot reset the BGP session after BFD went down", "peer", p.Name)
	}
}

// Failed reports whether a BFD change is a failure of the path to the
// peer: Up to Down because the detection time expired or the router said
// Down. Not when the router said AdminDown (RFC 5882 section 3.2: an
// administrative stop, not a failure, and the BGP session is kept) nor
// this host's own stop.
func Failed(c bfd.Change) bool {
	return c.From == bfd.Up && c.To == bfd.Down && !(c.Diag == bfd.DiagNeighborDown && c.RemoteDiag == bfd.DiagAdminDown)
}

// idleHoldAfterReset is the seconds GoBGP waits after a reset before it
// connects again.
const idleHoldAfterReset = 1

// apiPeer is GoBGP's configuration of p; restarting: this speaker
// restarts, and a peer with graceful restart hears so.
func apiPeer(p Peer, restarting bool) *api.Peer {
	ap := &api.Peer{
		Conf: &api.PeerConf{
			NeighborAddress: p.Address.String(), PeerAsn: p.ASN, LocalAsn: p.LocalASN,
			AuthPassword: p.Password, Description: p.Name,
		},
		Timers: &api.Timers{Config: &api.TimersConfig{
			HoldTime: uint64(p.HoldTime / time.Second), KeepaliveInterval: uint64(p.KeepaliveTime / time.Second),
			ConnectRetry: 5,
			// After a reset (BFD went down) GoBGP waits this long before
			// it connects again; its default, 30 s, would keep the host's
			// routes away that long once the path is back. 0 means the
			// default to GoBGP.
			IdleHoldTimeAfterReset: idleHoldAfterReset,
		}},
		Transport: &api.Transport{RemotePort: uint32(p.Port), PassiveMode: p.Passive},
	}
	if p.SourceAddress.IsValid() {
		ap.Transport.LocalAddress = p.SourceAddress.String()
	}
	if p.Multihop > 0 {
		ap.EbgpMultihop = &api.EbgpMultihop{Enabled: true, MultihopTtl: uint32(p.Multihop)}
	}
	if p.GracefulRestart > 0 {
		// Restart Time is 12 bits of seconds (the config checks the range).
		ap.GracefulRestart = &api.GracefulRestart{Enabled: true, RestartTime: uint32(p.GracefulRestart / time.Second),
			DeferralTime: deferralTime, LocalRestarting: restarting}
	}
	for _, f := range p.Families {
		afi := api.Family_AFI_IP
		if f == "ipv6" {
			afi = api.Family_AFI_IP6
		}
		as := &api.AfiSafi{Config: &api.AfiSafiConfig{
			Family: &api.Family{Afi: afi, Safi: api.Family_SAFI_UNICAST}, Enabled: true,
		}}
		if p.GracefulRestart > 0 {
			as.MpGracefulRestart = &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: true}}
		}
		ap.AfiSafis = append(ap.AfiSafis, as)
	}
	return ap
}

// peerEvent keeps the session state of each peer.
func (s *Speaker) peerEvent(logger klog.Logger, r *api.WatchEventResponse) {
	ev := r.GetPeer()
	if ev == nil || ev.GetType() != api.WatchEventResponse_PeerEvent_STATE {
		return
	}
	st := ev.GetPeer().GetState()
	addr, err := netip.ParseAddr(st.GetNeighborAddress())
	if err != nil {
		return
	}
	for _, p := range s.cfg.Peers {
		if p.Address != addr.Unmap() && p.Address != addr {
			continue
		}
		up := st.GetSessionState() == api.PeerState_ESTABLISHED
		s.mu.Lock()
		was := s.up[p.Name]
		s.up[p.Name] = up
		s.mu.Unlock()
		if up == was {
			return
		}
		s.countRoutes()
		logger.Info("BGP session changed", "peer", p.Name, "address", p.Address, "established", up, "state", st.GetSessionState().String())
		if up {
			sessionUp.WithLabelValues(p.Name).Set(1)
		} else {
			sessionUp.WithLabelValues(p.Name).Set(0)
			sessionDrops.WithLabelValues(p.Name).Inc()
		}
		if s.cfg.SessionChanged != nil {
			s.cfg.SessionChanged(p, up, st.GetSessionState().String())
		}
		return
	}
}

// apply advertises and withdraws what it takes to go from have to want,
// and updates have.
func (s *Speaker) apply(ctx context.Context, srv bgpServer, have map[netip.Prefix]Route, want []Route) error {
	add, del := Diff(have, want)
	var errs []error
	for _, p := range del {
		if err := withdraw(ctx, srv, have[p]); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(have, p)
	}
	for _, r := range add {
		path, err := apiPath(r, false)
		if err == nil {
			_, err = srv.AddPath(ctx, &api.AddPathRequest{Path: path})
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("advertise %s: %w", r.Prefix, err))
			continue
		}
		have[r.Prefix] = r
	}
	s.mu.Lock()
	s.offered = slices.Collect(maps.Values(have))
	s.mu.Unlock()
	s.countRoutes()
	return errors.Join(errs...)
}

func withdraw(ctx context.Context, srv bgpServer, r Route) error {
	path, err := apiPath(r, true)
	if err == nil {
		err = srv.DeletePath(ctx, &api.DeletePathRequest{Path: path})
	}
	if err != nil {
		return fmt.Errorf("withdraw %s: %w", r.Prefix, err)
	}
	return nil
}

// countRoutes sets the metric of the routes an established session
// carries.
func (s *Speaker) countRoutes() {
	s.mu.Lock()
	carried := Carried(s.offered, s.cfg.Peers, s.up)
	s.mu.Unlock()
	v4, v6 := 0, 0
	for _, r := range carried {
		if r.Prefix.Addr().Is4() {
			v4++
		} else {
			v6++
		}
	}
	announcedRoutes.WithLabelValues("ipv4").Set(float64(v4))
	announcedRoutes.WithLabelValues("ipv6").Set(float64(v6))
}

// shutdown withdraws every route (but those Keep names), waits for the
// routers to move the traffic, and stops the sessions — unless some route
// is kept: then it leaves them to close with the process (kept).
func (s *Speaker) shutdown(logger klog.Logger, srv bgpServer, have map[netip.Prefix]Route) (kept bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.mu.Lock()
	keep, handOver := s.keep, s.handOver
	s.mu.Unlock()
	var stay, later []Route
	for p, r := range have {
		switch {
		case keep[p]:
			stay = append(stay, r)
		case handOver[p]:
			later = append(later, r)
		}
	}
	if len(later) > 0 {
		// The others withdrawn, the handed-over ones made less preferred:
		// the routers keep sending their traffic here until the next
		// host's route comes, then send all of it there (a route with
		// another MED is no equal-cost path beside it: the flows'
		// replies, which the routers hash apart from the flows, must not
		// reach the other host while both advertise).
		med := uint32(handOverMED)
		for i := range later {
			later[i].MED = &med
		}
		if err := s.apply(ctx, srv, have, slices.Concat(stay, later)); err != nil {
			logger.Error(err, "Cannot withdraw every route before stopping")
		}
		wait := s.handOverWait()
		logger.Info("Routes the next hosts advertise once this one has left: advertised with a higher MED, withdrawn after a wait, so that the next hosts' routes take over first", "routes", len(later), "wait", wait)
		time.Sleep(wait)
	}
	if len(have) > len(stay) {
		if err := s.apply(ctx, srv, have, stay); err != nil {
			logger.Error(err, "Cannot withdraw every route before stopping")
		}
		logger.Info("Routes withdrawn; waiting for the routers before stopping", "wait", s.cfg.WithdrawWait, "kept", len(stay))
		time.Sleep(s.cfg.WithdrawWait)
	}
	if len(stay) > 0 {
		// No NOTIFICATION: the routers that help with graceful restart
		// keep the routes when the sessions close with the process.
		logger.Info("BGP speaker stopped; its sessions and routes stay until this process ends, for the routers to keep them while the next agent starts (graceful restart)",
			"kept", len(stay))
		return true, nil
	}
	if err := srv.StopBgp(ctx, &api.StopBgpRequest{}); err != nil {
		return false, fmt.Errorf("stop BGP: %w", err)
	}
	s.mu.Lock()
	s.up = map[string]bool{}
	s.mu.Unlock()
	s.countRoutes()
	for _, p := range s.cfg.Peers {
		sessionUp.WithLabelValues(p.Name).Set(0)
	}
	return false, nil
}

// handOverMED is the MULTI_EXIT_DISC of a route handed over (HandOver)
// while the next host takes it: worse than none (0 to routers that do not
// treat a missing MED as the worst), below the 4294967295 some routers
// take for unreachable.
const handOverMED = 1<<32 - 2

// DefaultHandOverWait is how long a stopping speaker keeps the routes it
// hands over (HandOver) after the others: the next host hears this one
// leave, syncs and advertises in about 0.2 s.
const DefaultHandOverWait = time.Second

// handOverWait is DefaultHandOverWait, or WithdrawWait when shorter (a
// speaker told not to wait does not).
func (s *Speaker) handOverWait() time.Duration {
	return min(DefaultHandOverWait, s.cfg.WithdrawWait)
}

// apiPath is r as a GoBGP path, its next hop this host's address in each
// session.
func apiPath(r Route, withdraw bool) (*api.Path, error) {
	a := r.Prefix.Addr()
	attrs := []bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(bgp.BGP_ORIGIN_ATTR_TYPE_IGP)}
	var nlri bgp.AddrPrefixInterface
	if a.Is4() {
		nlri = bgp.NewIPAddrPrefix(uint8(r.Prefix.Bits()), a.String())
		attrs = append(attrs, bgp.NewPathAttributeNextHop("0.0.0.0"))
	} else {
		nlri = bgp.NewIPv6AddrPrefix(uint8(r.Prefix.Bits()), a.String())
		attrs = append(attrs, bgp.NewPathAttributeMpReachNLRI("::", []bgp.AddrPrefixInterface{nlri}))
	}
	if len(r.Communities) > 0 {
		cs := make([]uint32, 0, len(r.Communities))
		for _, c := range r.Communities {
			v, err := parseCommunity(c)
			if err != nil {
				return nil, err
			}
			cs = append(cs, v)
		}
		attrs = append(attrs, bgp.NewPathAttributeCommunities(cs))
	}
	if r.LocalPref != nil {
		attrs = append(attrs, bgp.NewPathAttributeLocalPref(*r.LocalPref))
	}
	if r.MED != nil {
		attrs = append(attrs, bgp.NewPathAttributeMultiExitDisc(*r.MED))
	}
	return apiutil.NewPath(nlri, withdraw, attrs, time.Now())
}

// parseCommunity reads "ASN:value".
func parseCommunity(s string) (uint32, error) {
	for i := 0; i < len(s); i++ {
		if s[i] != ':' {
			continue
		}
		hi, err1 := strconv.ParseUint(s[:i], 10, 16)
		lo, err2 := strconv.ParseUint(s[i+1:], 10, 16)
		if err1 != nil || err2 != nil {
			break
		}
		return uint32(hi)<<16 | uint32(lo), nil
	}
	return 0, fmt.Errorf("community %q is not ASN:value", s)
}

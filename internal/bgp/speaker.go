package bgp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"sync"
	"time"

	api "github.com/osrg/gobgp/v3/api"
	"github.com/osrg/gobgp/v3/pkg/apiutil"
	"github.com/osrg/gobgp/v3/pkg/packet/bgp"
	"github.com/osrg/gobgp/v3/pkg/server"
	"k8s.io/klog/v2"
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
	// SessionChanged is told when a session becomes established (up) or
	// stops being so; nil: nobody is.
	SessionChanged func(peer Peer, up bool, state string)
}

// Speaker advertises the routes it is given to every peer. New only
// constructs; Run runs GoBGP.
type Speaker struct {
	cfg  Config
	kick chan struct{}

	mu   sync.Mutex
	want []Route
	up   map[string]bool // established sessions, by peer name
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
// the sessions.
func (s *Speaker) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("bgp")
	var secrets []string
	for _, p := range s.cfg.Peers {
		secrets = append(secrets, p.Password)
	}
	srv := server.NewBgpServer(server.LoggerOption(gobgpLogger{logger: logger, secrets: secrets}))
	go srv.Serve()
	defer srv.Stop()
	if err := s.start(klog.NewContext(ctx, logger), srv); err != nil {
		return err
	}
	logger.Info("BGP speaker running", "routerID", s.cfg.RouterID, "peers", len(s.cfg.Peers))
	have := map[netip.Prefix]Route{}
	for {
		select {
		case <-ctx.Done():
			return s.shutdown(logger, srv, have)
		case <-s.kick:
			s.mu.Lock()
			want := s.want
			s.mu.Unlock()
			if err := s.apply(ctx, srv, have, want); err != nil {
				logger.Error(err, "Cannot update advertised routes")
			}
		}
	}
}

func (s *Speaker) start(ctx context.Context, srv *server.BgpServer) error {
	listen := int32(-1) // connect only
	for _, p := range s.cfg.Peers {
		if p.Passive {
			listen = bgp.BGP_PORT
		}
	}
	asn := uint32(0)
	if len(s.cfg.Peers) > 0 {
		asn = s.cfg.Peers[0].LocalASN
	}
	if err := srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
		Asn: asn, RouterId: s.cfg.RouterID.String(), ListenPort: listen,
	}}); err != nil {
		return fmt.Errorf("start BGP: %w", err)
	}
	logger := klog.FromContext(ctx)
	if err := srv.WatchEvent(ctx, &api.WatchEventRequest{Peer: &api.WatchEventRequest_Peer{}}, func(r *api.WatchEventResponse) { s.peerEvent(logger, r) }); err != nil {
		return fmt.Errorf("watch BGP peers: %w", err)
	}
	var errs []error
	for _, p := range s.cfg.Peers {
		sessionUp.WithLabelValues(p.Name).Set(0)
		if err := srv.AddPeer(ctx, &api.AddPeerRequest{Peer: apiPeer(p)}); err != nil {
			errs = append(errs, fmt.Errorf("BGP peer %s (%s): %w", p.Name, p.Address, err))
		}
	}
	return errors.Join(errs...)
}

// apiPeer is GoBGP's configuration of p.
func apiPeer(p Peer) *api.Peer {
	ap := &api.Peer{
		Conf: &api.PeerConf{
			NeighborAddress: p.Address.String(), PeerAsn: p.ASN, LocalAsn: p.LocalASN,
			AuthPassword: p.Password, Description: p.Name,
		},
		Timers: &api.Timers{Config: &api.TimersConfig{
			HoldTime: uint64(p.HoldTime / time.Second), KeepaliveInterval: uint64(p.KeepaliveTime / time.Second),
			ConnectRetry: 5,
		}},
		Transport: &api.Transport{RemotePort: uint32(p.Port), PassiveMode: p.Passive},
	}
	if p.SourceAddress.IsValid() {
		ap.Transport.LocalAddress = p.SourceAddress.String()
	}
	if p.Multihop > 0 {
		ap.EbgpMultihop = &api.EbgpMultihop{Enabled: true, MultihopTtl: uint32(p.Multihop)}
	}
	for _, f := range p.Families {
		afi := api.Family_AFI_IP
		if f == "ipv6" {
			afi = api.Family_AFI_IP6
		}
		ap.AfiSafis = append(ap.AfiSafis, &api.AfiSafi{Config: &api.AfiSafiConfig{
			Family: &api.Family{Afi: afi, Safi: api.Family_SAFI_UNICAST}, Enabled: true,
		}})
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
func (s *Speaker) apply(ctx context.Context, srv *server.BgpServer, have map[netip.Prefix]Route, want []Route) error {
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
	countRoutes(have)
	return errors.Join(errs...)
}

func withdraw(ctx context.Context, srv *server.BgpServer, r Route) error {
	path, err := apiPath(r, true)
	if err == nil {
		err = srv.DeletePath(ctx, &api.DeletePathRequest{Path: path})
	}
	if err != nil {
		return fmt.Errorf("withdraw %s: %w", r.Prefix, err)
	}
	return nil
}

func countRoutes(have map[netip.Prefix]Route) {
	v4, v6 := 0, 0
	for p := range have {
		if p.Addr().Is4() {
			v4++
		} else {
			v6++
		}
	}
	announcedRoutes.WithLabelValues("ipv4").Set(float64(v4))
	announcedRoutes.WithLabelValues("ipv6").Set(float64(v6))
}

// shutdown withdraws every route, waits for the routers to move the
// traffic, and stops the sessions.
func (s *Speaker) shutdown(logger klog.Logger, srv *server.BgpServer, have map[netip.Prefix]Route) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if len(have) > 0 {
		if err := s.apply(ctx, srv, have, nil); err != nil {
			logger.Error(err, "Cannot withdraw every route before stopping")
		}
		logger.Info("Routes withdrawn; waiting for the routers before stopping", "wait", s.cfg.WithdrawWait)
		time.Sleep(s.cfg.WithdrawWait)
	}
	if err := srv.StopBgp(ctx, &api.StopBgpRequest{}); err != nil {
		return fmt.Errorf("stop BGP: %w", err)
	}
	for _, p := range s.cfg.Peers {
		sessionUp.WithLabelValues(p.Name).Set(0)
	}
	return nil
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

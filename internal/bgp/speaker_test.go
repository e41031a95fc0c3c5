package bgp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	api "github.com/osrg/gobgp/v3/api"
	"github.com/osrg/gobgp/v3/pkg/apiutil"
	bgpp "github.com/osrg/gobgp/v3/pkg/packet/bgp"
	"github.com/osrg/gobgp/v3/pkg/server"
	"k8s.io/klog/v2/textlogger"

	"github.com/groundcloud/groundcloud/internal/bfd"
)

// discard is a logger that writes nothing, for GoBGP servers that stand
// for routers.
var discard = textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(io.Discard)))

// TestActivePeersWhenItCannotListen runs the real GoBGP: the speaker's
// listening port (179 without CAP_NET_BIND_SERVICE; here a port another
// socket holds) cannot be bound. Its passive peer cannot work, but the
// session with its active peer, a GoBGP "router" on the loopback, is
// established all the same.
func TestActivePeersWhenItCannotListen(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	routerPort := startRouter(t, netip.MustParseAddr("127.0.0.1"))

	failed := make(chan string, 2)
	s := New(Config{
		RouterID:   netip.MustParseAddr("192.0.2.1"),
		ListenPort: int32(taken.Addr().(*net.TCPAddr).Port),
		Peers: []Peer{
			testPeer("router", "127.0.0.1", func(p *Peer) { p.Port = routerPort }),
			testPeer("waits", "127.0.0.2", func(p *Peer) { p.Passive = true }),
		},
		PeerFailed: func(p Peer, err error) { failed <- p.Name + ": " + err.Error() },
	})
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- s.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	deadline := time.After(20 * time.Second)
	for !s.Established()["router"] {
		select {
		case err := <-ran:
			ran <- nil
			t.Fatalf("Run returned before the active session was established: %v", err)
		case <-deadline:
			t.Fatal("the session with the active peer was not established in 20s")
		case <-time.After(100 * time.Millisecond):
		}
	}
	select {
	case f := <-failed:
		if !strings.HasPrefix(f, "waits: cannot listen on TCP port") || !strings.Contains(f, "address already in use") {
			t.Errorf("PeerFailed: %s; want the passive peer, and why", f)
		}
	default:
		t.Error("PeerFailed was not told of the passive peer")
	}
	if len(failed) > 0 {
		t.Errorf("PeerFailed also told of %s", <-failed)
	}
	if got := s.Advertised([]Route{{Prefix: pfx("192.0.2.10/32")}, {Prefix: pfx("2001:db8::10/128")}}); len(got) != 1 || got[0].Prefix != pfx("192.0.2.10/32") {
		t.Errorf("Advertised: %v; want the IPv4 route only, which the established session carries", got)
	}
}

// testPeer is an eBGP peer of the IPv4 family, changed by the modifiers.
func testPeer(name, addr string, mods ...func(*Peer)) Peer {
	p := Peer{
		Name: name, Address: netip.MustParseAddr(addr), ASN: 64512, LocalASN: 64513, Port: 179,
		HoldTime: 9 * time.Second, KeepaliveTime: 3 * time.Second, Families: []string{"ipv4"},
	}
	for _, m := range mods {
		m(&p)
	}
	return p
}

// startRouter runs a GoBGP server as the router (AS 64512, listening on
// a free port of 127.0.0.1, which it returns) that waits for the host at
// addr (AS 64513) to connect.
func startRouter(t *testing.T, host netip.Addr) int32 {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := int32(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	srv := server.NewBgpServer(server.LoggerOption(gobgpLogger{logger: discard}))
	go srv.Serve()
	t.Cleanup(srv.Stop)
	ctx := t.Context()
	if err := srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
		Asn: 64512, RouterId: "192.0.2.254", ListenPort: port, ListenAddresses: []string{"127.0.0.1"},
	}}); err != nil {
		t.Fatal(err)
	}
	if err := srv.AddPeer(ctx, &api.AddPeerRequest{Peer: &api.Peer{
		Conf:      &api.PeerConf{NeighborAddress: host.String(), PeerAsn: 64513},
		Transport: &api.Transport{PassiveMode: true},
	}}); err != nil {
		t.Fatal(err)
	}
	return port
}

// fakeServer records the speaker's calls to GoBGP; StartBgp fails while
// it listens when cannotListen, every time when broken, and AddPeer for
// the addresses in refuse.
type fakeServer struct {
	cannotListen, broken bool
	refuse               map[string]bool
	calls                []string
	deleted              []time.Time // when each DeletePath came
}

func (f *fakeServer) StartBgp(_ context.Context, r *api.StartBgpRequest) error {
	f.calls = append(f.calls, fmt.Sprintf("StartBgp listen %d", r.Global.ListenPort))
	if f.broken || f.cannotListen && r.Global.ListenPort > 0 {
		return errors.New("bind: permission denied")
	}
	return nil
}

func (f *fakeServer) StopBgp(context.Context, *api.StopBgpRequest) error {
	f.calls = append(f.calls, "StopBgp")
	return nil
}

func (f *fakeServer) WatchEvent(context.Context, *api.WatchEventRequest, func(*api.WatchEventResponse)) error {
	f.calls = append(f.calls, "WatchEvent")
	return nil
}

func (f *fakeServer) AddPeer(_ context.Context, r *api.AddPeerRequest) error {
	f.calls = append(f.calls, "AddPeer "+r.Peer.Conf.Description)
	if f.refuse[r.Peer.Conf.NeighborAddress] {
		return errors.New("refused")
	}
	return nil
}

func (f *fakeServer) AddPath(_ context.Context, r *api.AddPathRequest) (*api.AddPathResponse, error) {
	nlri, err := apiutil.GetNativeNlri(r.Path)
	if err != nil {
		return nil, err
	}
	call := "AddPath " + nlri.String()
	attrs, err := apiutil.GetNativePathAttributes(r.Path)
	if err != nil {
		return nil, err
	}
	for _, a := range attrs {
		if med, ok := a.(*bgpp.PathAttributeMultiExitDisc); ok {
			call += fmt.Sprintf(" MED %d", med.Value)
		}
	}
	f.calls = append(f.calls, call)
	return &api.AddPathResponse{}, nil
}

func (f *fakeServer) DeletePath(_ context.Context, r *api.DeletePathRequest) error {
	nlri, err := apiutil.GetNativeNlri(r.Path)
	if err != nil {
		return err
	}
	f.calls = append(f.calls, "DeletePath "+nlri.String())
	f.deleted = append(f.deleted, time.Now())
	return nil
}

func (f *fakeServer) ResetPeer(_ context.Context, r *api.ResetPeerRequest) error {
	f.calls = append(f.calls, fmt.Sprintf("ResetPeer %s soft=%v: %s", r.Address, r.Soft, r.Communication))
	return nil
}

// TestBFDChangedResetsSession: a BFD session going from Up to Down (the
// router silent, or saying Down) resets that peer's BGP session at once;
// coming up, the router's administrative stop (it says AdminDown) and this
// host's own stop do not. Every change is told to BFDChanged.
func TestBFDChangedResetsSession(t *testing.T) {
	var told []string
	s := New(Config{BFDChanged: func(p Peer, c bfd.Change) { told = append(told, p.Name+" "+c.To.String()) }})
	tor := testPeer("tor", "192.0.2.1")
	var srv fakeServer
	for _, c := range []bfd.Change{
		{From: bfd.Down, To: bfd.Init},
		{From: bfd.Init, To: bfd.Up},
		{From: bfd.Up, To: bfd.Down, Diag: bfd.DiagTimeExpired},
		{From: bfd.Down, To: bfd.Up},
		{From: bfd.Up, To: bfd.Down, Diag: bfd.DiagNeighborDown, RemoteDiag: bfd.DiagPathDown},
		{From: bfd.Down, To: bfd.Up},
		{From: bfd.Up, To: bfd.Down, Diag: bfd.DiagNeighborDown, RemoteDiag: bfd.DiagAdminDown},
		{From: bfd.Down, To: bfd.Up},
		{From: bfd.Up, To: bfd.AdminDown, Diag: bfd.DiagAdminDown},
	} {
		s.bfdChanged(t.Context(), discard, &srv, tor, c)
	}
	want := []string{
		"ResetPeer 192.0.2.1 soft=false: BFD session down: detection time expired",
		"ResetPeer 192.0.2.1 soft=false: BFD session down: neighbor signaled session down",
	}
	if diff := cmp.Diff(want, srv.calls); diff != "" {
		t.Errorf("calls to GoBGP (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"tor Init", "tor Up", "tor Down", "tor Up", "tor Down", "tor Up", "tor Down", "tor Up", "tor AdminDown"}, told); diff != "" {
		t.Errorf("BFDChanged (-want +got):\n%s", diff)
	}
}

// TestStart: a peer that cannot work leaves the others' sessions alone;
// only a GoBGP that cannot start at all fails the speaker.
func TestStart(t *testing.T) {
	active := testPeer("active", "10.0.0.1")
	passive := testPeer("passive", "10.0.0.2", func(p *Peer) { p.Passive = true })
	for _, tt := range []struct {
		name       string
		srv        fakeServer
		peers      []Peer
		wantCalls  []string
		wantFailed []string
		wantErr    string
	}{
		{
			name:      "active peers only: no listening",
			peers:     []Peer{active},
			wantCalls: []string{"StartBgp listen -1", "WatchEvent", "AddPeer active"},
		},
		{
			name:      "a passive peer: listens on 179",
			peers:     []Peer{active, passive},
			wantCalls: []string{"StartBgp listen 179", "WatchEvent", "AddPeer active", "AddPeer passive"},
		},
		{
			name:       "cannot listen: starts without, the passive peer fails",
			srv:        fakeServer{cannotListen: true},
			peers:      []Peer{passive, active},
			wantCalls:  []string{"StartBgp listen 179", "StopBgp", "StartBgp listen -1", "WatchEvent", "AddPeer active"},
			wantFailed: []string{"passive: cannot listen on TCP port 179 for the router to connect (binding a port below 1024 needs CAP_NET_BIND_SERVICE): bind: permission denied"},
		},
		{
			name:       "a peer GoBGP refuses: the others are added",
			srv:        fakeServer{refuse: map[string]bool{"10.0.0.1": true}},
			peers:      []Peer{active, testPeer("other", "10.0.0.3")},
			wantCalls:  []string{"StartBgp listen -1", "WatchEvent", "AddPeer active", "AddPeer other"},
			wantFailed: []string{"active: GoBGP refused the peer: refused"},
		},
		{
			name:      "GoBGP does not start",
			srv:       fakeServer{broken: true},
			peers:     []Peer{passive},
			wantCalls: []string{"StartBgp listen 179", "StopBgp", "StartBgp listen -1"},
			wantErr:   "start BGP: cannot listen on TCP port 179",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var failed []string
			s := New(Config{RouterID: netip.MustParseAddr("192.0.2.1"), Peers: tt.peers, PeerFailed: func(p Peer, err error) {
				failed = append(failed, p.Name+": "+err.Error())
			}})
			err := s.start(t.Context(), &tt.srv)
			if err == nil {
				s.addPeers(t.Context(), &tt.srv, false)
			}
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.wantErr)) {
				t.Errorf("start: %v; want error %q", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.wantCalls, tt.srv.calls); diff != "" {
				t.Errorf("calls to GoBGP (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantFailed, failed); diff != "" {
				t.Errorf("failed peers (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPeerTimers: the hold, keepalive and idle-after-reset times GoBGP
// runs a peer with,
// from the speaker's configuration of it. GoBGP takes a hold time of 0
// for unset and runs 90s, which is why the cloud-config refuses 0.
func TestPeerTimers(t *testing.T) {
	srv := server.NewBgpServer(server.LoggerOption(gobgpLogger{logger: discard}))
	go srv.Serve()
	defer srv.Stop()
	ctx := t.Context()
	if err := srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{Asn: 64513, RouterId: "192.0.2.1", ListenPort: -1}}); err != nil {
		t.Fatal(err)
	}
	for i, tt := range []struct {
		name                string
		hold, keepalive     time.Duration
		wantHold, wantAlive uint64
	}{
		{name: "3s, keepalive 1s", hold: 3 * time.Second, keepalive: time.Second, wantHold: 3, wantAlive: 1},
		{name: "90s, keepalive 30s", hold: 90 * time.Second, keepalive: 30 * time.Second, wantHold: 90, wantAlive: 30},
		{name: "0 is taken for unset", hold: 0, keepalive: 0, wantHold: 90, wantAlive: 30},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// A peer nobody answers for: GoBGP only tries to connect.
			addr := fmt.Sprintf("192.0.2.%d", 100+i)
			p := testPeer(tt.name, addr, func(p *Peer) { p.HoldTime, p.KeepaliveTime = tt.hold, tt.keepalive })
			if err := srv.AddPeer(ctx, &api.AddPeerRequest{Peer: apiPeer(p, false)}); err != nil {
				t.Fatal(err)
			}
			var got *api.TimersConfig
			if err := srv.ListPeer(ctx, &api.ListPeerRequest{Address: addr}, func(p *api.Peer) { got = p.GetTimers().GetConfig() }); err != nil || got == nil {
				t.Fatalf("ListPeer: %v, %v", got, err)
			}
			if got.HoldTime != tt.wantHold || got.KeepaliveInterval != tt.wantAlive {
				t.Errorf("GoBGP runs hold time %ds, keepalive %ds; want %ds, %ds", got.HoldTime, got.KeepaliveInterval, tt.wantHold, tt.wantAlive)
			}
			// A session reset when BFD went down connects again after
			// 1 s, not GoBGP's default of 30 s.
			if got.IdleHoldTimeAfterReset != 1 {
				t.Errorf("GoBGP waits %ds after a reset, want 1s", got.IdleHoldTimeAfterReset)
			}
		})
	}
}

// TestHandOverWithdrawsLast: a stopping speaker advertises the routes it
// hands over (the elected host of a proxy address: another host advertises
// it once this one has left) again with a MED, so that the next host's
// route becomes the routers' only best path, and withdraws them after the
// others, at least the hand-over wait later; kept routes stay.
func TestHandOverWithdrawsLast(t *testing.T) {
	route := func(s string) Route { return Route{Prefix: netip.MustParsePrefix(s)} }
	ecmp, elected, kept := route("192.0.2.1/32"), route("192.0.2.2/32"), route("192.0.2.3/32")
	s := New(Config{WithdrawWait: 200 * time.Millisecond})
	s.HandOver([]netip.Prefix{elected.Prefix})
	s.Keep([]netip.Prefix{kept.Prefix})
	var srv fakeServer
	have := map[netip.Prefix]Route{ecmp.Prefix: ecmp, elected.Prefix: elected, kept.Prefix: kept}
	if _, err := s.shutdown(discard, &srv, have); err != nil {
		t.Fatal(err)
	}
	want := []string{"DeletePath 192.0.2.1/32", "AddPath 192.0.2.2/32 MED 4294967294", "DeletePath 192.0.2.2/32"}
	if diff := cmp.Diff(want, srv.calls); diff != "" {
		t.Fatalf("calls (-want +got):\n%s", diff)
	}
	if gap := srv.deleted[1].Sub(srv.deleted[0]); gap < s.handOverWait() {
		t.Errorf("the handed-over route was withdrawn %v after the others, want at least %v", gap, s.handOverWait())
	}
}

package bfd

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
	"k8s.io/klog/v2"
)

// Port is the UDP port single-hop BFD Control packets go to (RFC 5881).
const Port = 3784

// The source ports of a session's packets (RFC 5881 section 4).
const (
	minSourcePort = 49152
	maxSourcePort = 65535
)

// ttl is the TTL (hop limit) of every packet sent, and the only one
// accepted: a packet that crossed a router cannot be from a neighbour
// (RFC 5881 section 5, the Generalized TTL Security Mechanism).
const ttl = 255

// Peer is a session to run: a neighbour on a shared link.
type Peer struct {
	// Name names the session in logs, metrics and changes.
	Name string
	// Remote is the neighbour's address.
	Remote netip.Addr
	// Local is this host's source address; invalid: the kernel's choice.
	Local netip.Addr
	Settings
}

// Config is what a Runner needs.
type Config struct {
	Peers []Peer
	// Changed is told of each state change of a session, from the
	// session's own goroutine; nil: nobody is.
	Changed func(Peer, Change)
}

// Runner runs the BFD sessions of Config.Peers. Listen opens its sockets
// (in the caller's network namespace); Run runs the sessions.
type Runner struct {
	cfg       Config
	receivers []*receiver
	sessions  []*session
	byDiscr   map[uint32]*session
	byRemote  map[netip.Addr]*session
	discarded sync.Map // reason -> *atomic.Uint64
}

// session is one Session and its sender.
type session struct {
	peer  Peer
	s     *Session
	conn  *net.UDPConn
	to    netip.AddrPort
	rx    chan received
	state atomic.Uint32
}

type received struct {
	p  Packet
	at time.Time
}

// receiver reads the packets of one family from the BFD port.
type receiver struct {
	conn *net.UDPConn
	read func(b []byte) (n int, hops int, src netip.Addr, err error)
}

// Listen opens the sockets of the sessions: one receiving socket per
// family on the BFD port, and a sending socket per session on a source
// port of its own. The sockets belong to the caller's network namespace.
func Listen(cfg Config) (*Runner, error) {
	r := &Runner{cfg: cfg, byDiscr: map[uint32]*session{}, byRemote: map[netip.Addr]*session{}}
	var errs []error
	families := map[bool]bool{}
	for _, p := range cfg.Peers {
		switch {
		case !p.Remote.IsValid():
			errs = append(errs, fmt.Errorf("BFD peer %s: no address", p.Name))
			continue
		case r.byRemote[p.Remote.Unmap()] != nil:
			errs = append(errs, fmt.Errorf("BFD peer %s: %s already has a session", p.Name, p.Remote))
			continue
		case p.DetectMult == 0 || p.DesiredMinTx <= 0 || p.RequiredMinRx <= 0:
			errs = append(errs, fmt.Errorf("BFD peer %s: intervals and multiplier must be positive", p.Name))
			continue
		}
		p.Remote = p.Remote.Unmap()
		ss, err := r.newSession(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		r.sessions = append(r.sessions, ss)
		r.byDiscr[ss.s.LocalDiscr()] = ss
		r.byRemote[p.Remote] = ss
		families[p.Remote.Is4()] = true
	}
	for is4 := range families {
		rc, err := listen(is4)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		r.receivers = append(r.receivers, rc)
	}
	if err := errors.Join(errs...); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

// newSession opens p's sending socket on a free source port and picks a
// discriminator no other session has.
func (r *Runner) newSession(p Peer) (*session, error) {
	discr := randomUint32()
	for discr == 0 || r.byDiscr[discr] != nil {
		discr = randomUint32()
	}
	conn, err := sender(p)
	if err != nil {
		return nil, fmt.Errorf("BFD peer %s (%s): %w", p.Name, p.Remote, err)
	}
	ss := &session{
		peer: p, s: NewSession(discr, p.Settings), conn: conn,
		to: netip.AddrPortFrom(p.Remote, Port), rx: make(chan received, 16),
	}
	ss.state.Store(uint32(Down))
	return ss, nil
}

// sender opens a UDP socket on a source port from RFC 5881's range,
// sending with TTL 255.
func sender(p Peer) (*net.UDPConn, error) {
	network, local := "udp4", netip.IPv4Unspecified()
	if p.Remote.Is6() {
		network, local = "udp6", netip.IPv6Unspecified()
	}
	if p.Local.IsValid() {
		local = p.Local
	}
	var last error
	for range 64 {
		port := minSourcePort + int(randomUint32()%(maxSourcePort-minSourcePort+1))
		conn, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(netip.AddrPortFrom(local, uint16(port))))
		if errors.Is(err, syscall.EADDRINUSE) {
			last = err
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("open a sending socket on %s: %w", local, err)
		}
		if p.Remote.Is4() {
			err = ipv4.NewPacketConn(conn).SetTTL(ttl)
		} else {
			err = ipv6.NewPacketConn(conn).SetHopLimit(ttl)
		}
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("set TTL 255: %w", err)
		}
		return conn, nil
	}
	return nil, fmt.Errorf("no free source port from %d to %d: %w", minSourcePort, maxSourcePort, last)
}

// readBuffer is the receiving sockets' buffer (the kernel caps it at
// net.core.rmem_max): room for the neighbours' packets beside a burst of
// others.
const readBuffer = 1 << 20

// listen opens the receiving socket of a family on the BFD port, asking
// the kernel for each packet's TTL (hop limit).
func listen(is4 bool) (*receiver, error) {
	network, ip, family := "udp6", net.IPv6unspecified, "IPv6"
	if is4 {
		network, ip, family = "udp4", net.IPv4zero, "IPv4"
	}
	conn, err := net.ListenUDP(network, &net.UDPAddr{IP: ip, Port: Port})
	if err != nil {
		return nil, fmt.Errorf("listen for BFD on UDP port %d (%s): %w", Port, family, err)
	}
	_ = conn.SetReadBuffer(readBuffer)
	rc := &receiver{conn: conn}
	if is4 {
		pc := ipv4.NewPacketConn(conn)
		err = pc.SetControlMessage(ipv4.FlagTTL, true)
		rc.read = func(b []byte) (int, int, netip.Addr, error) {
			n, cm, src, err := pc.ReadFrom(b)
			hops := -1
			if cm != nil {
				hops = cm.TTL
			}
			return n, hops, addrOf(src), err
		}
	} else {
		pc := ipv6.NewPacketConn(conn)
		err = pc.SetControlMessage(ipv6.FlagHopLimit, true)
		rc.read = func(b []byte) (int, int, netip.Addr, error) {
			n, cm, src, err := pc.ReadFrom(b)
			hops := -1
			if cm != nil {
				hops = cm.HopLimit
			}
			return n, hops, addrOf(src), err
		}
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("ask for the TTL of received %s packets: %w", family, err)
	}
	return rc, nil
}

func addrOf(a net.Addr) netip.Addr {
	if u, ok := a.(*net.UDPAddr); ok {
		return u.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// Run runs the sessions until ctx ends; then it puts each AdminDown,
// tells the neighbours so, and closes the sockets.
func (r *Runner) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithName("bfd")
	var wg sync.WaitGroup
	for _, rc := range r.receivers {
		wg.Go(func() { r.receive(logger, rc) })
	}
	var sessions sync.WaitGroup
	for _, ss := range r.sessions {
		sessions.Go(func() { r.run(ctx, logger, ss) })
	}
	sessions.Wait()
	r.close()
	wg.Wait()
}

// State returns the state of the session named name (AdminDown when
// there is none).
func (r *Runner) State(name string) State {
	for _, ss := range r.sessions {
		if ss.peer.Name == name {
			return State(ss.state.Load())
		}
	}
	return AdminDown
}

// Discarded returns how many received packets were discarded, by reason.
func (r *Runner) Discarded() map[string]uint64 {
	out := map[string]uint64{}
	r.discarded.Range(func(k, v any) bool {
		out[k.(string)] = v.(*atomic.Uint64).Load()
		return true
	})
	return out
}

func (r *Runner) discard(reason string) {
	v, _ := r.discarded.LoadOrStore(reason, new(atomic.Uint64))
	v.(*atomic.Uint64).Add(1)
	discardedPackets.WithLabelValues(reason).Inc()
}

// Reasons a received packet is discarded, as Discarded and the metric
// name them.
const (
	discardTTL     = "ttl"                // not sent by a neighbour (TTL or hop limit not 255)
	discardInvalid = "invalid"            // fails RFC 5880's checks (Parse)
	discardUnknown = "unknown-peer"       // no session with its discriminator and source address
	discardZero    = "zero-discriminator" // no Your Discriminator, for a session past Down
	discardBusy    = "session-busy"       // its session's queue is full (a flood)
)

// receive reads packets until the socket closes and hands each valid one
// to its session.
func (r *Runner) receive(logger klog.Logger, rc *receiver) {
	b := make([]byte, 1500)
	for {
		n, hops, src, err := rc.read(b)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				logger.Error(err, "Cannot read BFD packets; the sessions of this family will time out")
			}
			return
		}
		at := time.Now()
		if hops != ttl {
			r.discard(discardTTL)
			continue
		}
		p, err := Parse(b[:n])
		if err != nil {
			r.discard(discardInvalid)
			continue
		}
		ss := r.byDiscr[p.YourDiscr]
		if p.YourDiscr == 0 {
			ss = r.byRemote[src]
		}
		if ss == nil || ss.peer.Remote != src {
			r.discard(discardUnknown)
			continue
		}
		// The session would discard it too (RFC 5880 section 6.8.6);
		// here it cannot crowd out the neighbour's packets.
		if st := State(ss.state.Load()); p.YourDiscr == 0 && st != Down && st != AdminDown {
			r.discard(discardZero)
			continue
		}
		select {
		case ss.rx <- received{p: p, at: at}:
		default:
			r.discard(discardBusy)
		}
	}
}

// adminDownPackets is how many AdminDown packets a stopping session
// sends, adminDownGap apart: one may be lost.
const (
	adminDownPackets = 3
	adminDownGap     = 20 * time.Millisecond
)

// run drives one session until ctx ends.
func (r *Runner) run(ctx context.Context, logger klog.Logger, ss *session) {
	logger = logger.WithValues("peer", ss.peer.Name, "address", ss.peer.Remote)
	sessionUp.WithLabelValues(ss.peer.Name).Set(0)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		if c, ok := ss.s.Expire(now); ok {
			r.changed(logger, ss, c)
		}
		if ss.s.SendNow(now) {
			r.send(logger, ss, ss.s.Next(now))
		}
		var wake <-chan time.Time
		if at := ss.s.Wake(now); !at.IsZero() {
			timer.Reset(time.Until(at))
			wake = timer.C
		}
		select {
		case <-ctx.Done():
			r.stop(logger, ss)
			return
		case in := <-ss.rx:
			if c, ok := ss.s.Receive(in.p, in.at); ok {
				r.changed(logger, ss, c)
			}
		case <-wake:
		}
	}
}

// stop puts the session AdminDown and tells the neighbour.
func (r *Runner) stop(logger klog.Logger, ss *session) {
	from := ss.s.State()
	ss.s.Stop(time.Now())
	for i := range adminDownPackets {
		if i > 0 {
			time.Sleep(adminDownGap)
		}
		r.send(logger, ss, ss.s.Next(time.Now()))
	}
	if from != AdminDown {
		r.changed(logger, ss, Change{From: from, To: AdminDown, Diag: DiagAdminDown})
	}
}

func (r *Runner) send(logger klog.Logger, ss *session, p Packet) {
	if _, err := ss.conn.WriteToUDPAddrPort(p.Marshal(), ss.to); err != nil {
		logger.V(4).Info("Cannot send a BFD packet", "err", err)
	}
}

func (r *Runner) changed(logger klog.Logger, ss *session, c Change) {
	ss.state.Store(uint32(c.To))
	up := 0.0
	if c.To == Up {
		up = 1
	}
	sessionUp.WithLabelValues(ss.peer.Name).Set(up)
	if c.From == Up {
		sessionDowns.WithLabelValues(ss.peer.Name, c.Diag.String()).Inc()
	}
	logger.Info("BFD session changed", "from", c.From.String(), "to", c.To.String(),
		"diagnostic", c.Diag.String(), "remoteDiagnostic", c.RemoteDiag.String(), "detectionTime", ss.s.DetectionTime())
	if r.cfg.Changed != nil {
		r.cfg.Changed(ss.peer, c)
	}
}

// close closes every socket.
func (r *Runner) close() {
	for _, rc := range r.receivers {
		rc.conn.Close()
	}
	for _, ss := range r.sessions {
		ss.conn.Close()
	}
}

func randomUint32() uint32 {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return binary.BigEndian.Uint32(b[:])
}

package bfd

import (
	"math/rand/v2"
	"time"
)

// Settings are a session's timers (RFC 5880 section 6.8.1).
type Settings struct {
	// DesiredMinTx is how often this host wants to send Control packets
	// while the session is Up (bfd.DesiredMinTxInterval).
	DesiredMinTx time.Duration
	// RequiredMinRx is the shortest interval between received Control
	// packets this host can handle (bfd.RequiredMinRxInterval).
	RequiredMinRx time.Duration
	// DetectMult is how many intervals without a packet the remote
	// system waits before it declares the session down.
	DetectMult uint8
}

// Defaults are the timers of a session that sets none: 300 ms, times 3.
var Defaults = Settings{DesiredMinTx: 300 * time.Millisecond, RequiredMinRx: 300 * time.Millisecond, DetectMult: 3}

// slowTx is the least transmit interval while the session is not Up
// (section 6.8.3: "not less than one second").
const slowTx = time.Second

// Change is a session's state change.
type Change struct {
	From, To State
	// Diag is this host's diagnostic: why it left Up.
	Diag Diag
	// RemoteDiag is the remote system's diagnostic in the packet that
	// brought the change (none when the detection time expired).
	RemoteDiag Diag
}

// Session is one BFD session in asynchronous mode (RFC 5880 section
// 6.8), active role, without authentication, Demand or Echo. It is pure:
// the caller feeds it received packets and the time, asks it what to send
// and when, and does the networking. Not safe for concurrent use.
type Session struct {
	cfg Settings

	state       State
	localDiscr  uint32
	remoteDiscr uint32
	diag        Diag

	// desiredMinTx is the interval this host advertises now: slowTx
	// while the session is not Up, cfg.DesiredMinTx once it is.
	desiredMinTx time.Duration
	// txInterval is the interval in use for sending; it follows
	// desiredMinTx at once when that decreases, after the Poll Sequence
	// when it increases (section 6.8.3).
	txInterval time.Duration

	remoteMinRx        time.Duration // bfd.RemoteMinRxInterval
	remoteDesiredMinTx time.Duration
	remoteDetectMult   uint8

	polling   bool // a Poll Sequence is in progress: packets carry P
	sendFinal bool // the next packet answers a Poll with F

	// detectAt is when the detection time runs out (zero: not running,
	// no packet received since the last expiry).
	detectAt time.Time
	// txAt is when the next periodic packet is due.
	txAt time.Time

	jitter func() float64 // in [0, 1)
}

// NewSession returns a session in state Down whose packets carry
// localDiscr (nonzero, unique among this host's sessions).
func NewSession(localDiscr uint32, cfg Settings) *Session {
	s := &Session{
		cfg: cfg, state: Down, localDiscr: localDiscr,
		desiredMinTx: max(slowTx, cfg.DesiredMinTx),
		remoteMinRx:  time.Microsecond, // section 6.8.1: the initial value is 1
		jitter:       rand.Float64,
	}
	s.txInterval = s.desiredMinTx
	return s
}

// State is the session's state.
func (s *Session) State() State { return s.state }

// LocalDiscr is the discriminator this host chose for the session.
func (s *Session) LocalDiscr() uint32 { return s.localDiscr }

// RemoteDiscr is the remote system's discriminator (0: not known).
func (s *Session) RemoteDiscr() uint32 { return s.remoteDiscr }

// DetectionTime is how long the session waits for a packet before it
// declares the remote system down: the remote system's multiplier times
// the larger of this host's RequiredMinRx and the remote's DesiredMinTx
// (section 6.8.4).
func (s *Session) DetectionTime() time.Duration {
	return time.Duration(s.remoteDetectMult) * max(s.cfg.RequiredMinRx, s.remoteDesiredMinTx)
}

// Receive processes a packet that passed Parse and was addressed to this
// session (its Your Discriminator is this session's, or zero and it came
// from the session's peer); now is when it arrived. It returns the state
// change it brought, if any; after it the caller sends at once when
// SendNow says so. A packet the session must discard changes nothing.
func (s *Session) Receive(p Packet, now time.Time) (Change, bool) {
	if p.YourDiscr != 0 && p.YourDiscr != s.localDiscr {
		return Change{}, false
	}
	if p.YourDiscr == 0 && s.state != Down && s.state != AdminDown {
		return Change{}, false
	}
	s.remoteDiscr = p.MyDiscr
	s.remoteMinRx = p.RequiredMinRx
	s.remoteDesiredMinTx = p.DesiredMinTx
	s.remoteDetectMult = p.DetectMult
	if p.Final && s.polling {
		s.polling = false
		s.txInterval = s.desiredMinTx
	}
	if s.state == AdminDown {
		return Change{}, false
	}
	s.detectAt = now.Add(s.DetectionTime())
	if p.Poll {
		s.sendFinal = true
	}
	from := s.state
	switch {
	case p.State == AdminDown:
		if s.state != Down {
			s.down(DiagNeighborDown)
		}
	case s.state == Down && p.State == Down:
		s.state = Init
	case s.state == Down && p.State == Init, s.state == Init && (p.State == Init || p.State == Up):
		s.up()
	case s.state == Up && p.State == Down:
		s.down(DiagNeighborDown)
	}
	if s.state == from {
		return Change{}, false
	}
	s.txAt = now // tell the remote system at once
	return Change{From: from, To: s.state, Diag: s.diag, RemoteDiag: p.Diag}, true
}

// up moves the session to Up and starts sending at the configured
// interval: a change of DesiredMinTx, so a Poll Sequence.
func (s *Session) up() {
	s.state = Up
	s.diag = DiagNone
	s.setDesiredMinTx(s.cfg.DesiredMinTx)
}

// down moves the session to Down with diag, back at the slow interval.
func (s *Session) down(diag Diag) {
	s.state = Down
	s.diag = diag
	s.polling = false
	s.setDesiredMinTx(max(slowTx, s.cfg.DesiredMinTx))
}

func (s *Session) setDesiredMinTx(d time.Duration) {
	if d == s.desiredMinTx {
		return
	}
	increase := d > s.desiredMinTx
	s.desiredMinTx = d
	if s.state == Up {
		s.polling = true
	}
	if !increase || s.state != Up {
		s.txInterval = d
	}
}

// Expire checks the detection time at now: when it ran out the remote
// system is forgotten, and a session in Init or Up goes Down (diagnostic
// DiagTimeExpired).
func (s *Session) Expire(now time.Time) (Change, bool) {
	if s.detectAt.IsZero() || now.Before(s.detectAt) {
		return Change{}, false
	}
	s.detectAt = time.Time{}
	s.remoteDiscr = 0
	s.remoteMinRx = time.Microsecond
	if s.state != Init && s.state != Up {
		return Change{}, false
	}
	from := s.state
	s.down(DiagTimeExpired)
	s.txAt = now
	return Change{From: from, To: Down, Diag: DiagTimeExpired}, true
}

// SendNow reports whether a packet is due at now: a periodic one, a
// state change to tell or a Poll to answer. The caller then sends Next.
func (s *Session) SendNow(now time.Time) bool {
	return s.sendFinal || (s.remoteMinRx > 0 && !now.Before(s.txAt))
}

// Next returns the packet to send now and schedules the next periodic
// one: the larger of this host's transmit interval and the remote's
// RequiredMinRx, less 0 to 25 % jitter (section 6.8.7; 10 to 25 % with a
// multiplier of 1).
func (s *Session) Next(now time.Time) Packet {
	p := Packet{
		Diag: s.diag, State: s.state, Poll: s.polling && !s.sendFinal, Final: s.sendFinal,
		DetectMult: s.cfg.DetectMult, MyDiscr: s.localDiscr, YourDiscr: s.remoteDiscr,
		DesiredMinTx: s.desiredMinTx, RequiredMinRx: s.cfg.RequiredMinRx,
	}
	s.sendFinal = false
	interval := max(s.txInterval, s.remoteMinRx)
	most := 1.0
	if s.cfg.DetectMult == 1 {
		most = 0.9
	}
	s.txAt = now.Add(time.Duration(float64(interval) * (0.75 + (most-0.75)*s.jitter())))
	return p
}

// Wake is the next time the session needs the caller: a packet due or
// the detection time running out; the zero time when it needs nothing
// (the remote system asked for no packets and none was received).
func (s *Session) Wake(now time.Time) time.Time {
	if s.sendFinal {
		return now
	}
	var w time.Time
	if s.remoteMinRx > 0 {
		w = s.txAt
	}
	if !s.detectAt.IsZero() && (w.IsZero() || s.detectAt.Before(w)) {
		w = s.detectAt
	}
	return w
}

// Stop puts the session AdminDown (diagnostic DiagAdminDown): the
// packets it sends after say so, and the remote system takes the session
// down without declaring a failure (section 6.8.16).
func (s *Session) Stop(now time.Time) {
	s.state = AdminDown
	s.diag = DiagAdminDown
	s.polling = false
	s.txAt = now
}

package bfd

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)

// pair is two sessions that hear each other without loss, and a clock.
type pair struct {
	a, b *Session
	now  time.Time
	// changes are the state changes of a and b, in order.
	changes []string
	// polls and finals count the packets with P and with F.
	polls, finals int
}

func newPair(cfg Settings) *pair {
	p := &pair{a: NewSession(1, cfg), b: NewSession(2, cfg), now: t0}
	p.a.jitter = func() float64 { return 1 }
	p.b.jitter = func() float64 { return 1 }
	return p
}

// deliver sends from's due packet (if any) to to.
func (p *pair) deliver(name string, from, to *Session) {
	if !from.SendNow(p.now) {
		return
	}
	pkt := from.Next(p.now)
	if pkt.Poll {
		p.polls++
	}
	if pkt.Final {
		p.finals++
	}
	if c, ok := to.Receive(pkt, p.now); ok {
		p.changes = append(p.changes, name+":"+c.From.String()+">"+c.To.String())
	}
}

// run advances the clock in 1 ms steps for d, exchanging what is due.
func (p *pair) run(d time.Duration) {
	for end := p.now.Add(d); p.now.Before(end); p.now = p.now.Add(time.Millisecond) {
		for _, s := range []*Session{p.a, p.b} {
			if c, ok := s.Expire(p.now); ok {
				p.changes = append(p.changes, "expired:"+c.From.String()+">"+c.To.String())
			}
		}
		p.deliver("b", p.a, p.b)
		p.deliver("a", p.b, p.a)
	}
}

// Two sessions come Up through the three-way handshake (Down, Init, Up)
// while sending at the slow interval, then each runs a Poll Sequence and
// sends at the configured one.
func TestSessionsComeUp(t *testing.T) {
	p := newPair(Defaults)
	if got := p.a.Next(p.now); got.State != Down || got.YourDiscr != 0 || got.DesiredMinTx != time.Second || got.RequiredMinRx != 300*time.Millisecond {
		t.Fatalf("first packet: %+v", got)
	}
	p.a.txAt = p.now
	p.run(10 * time.Millisecond)
	if p.a.State() != Up || p.b.State() != Up {
		t.Fatalf("states after the handshake: a %s, b %s; changes %v", p.a.State(), p.b.State(), p.changes)
	}
	want := []string{"b:Down>Init", "a:Down>Up", "b:Init>Up"}
	if len(p.changes) != 3 || p.changes[0] != want[0] || p.changes[1] != want[1] || p.changes[2] != want[2] {
		t.Errorf("changes %v, want %v", p.changes, want)
	}
	if p.a.RemoteDiscr() != 2 || p.b.RemoteDiscr() != 1 {
		t.Errorf("discriminators learnt: a knows %d, b knows %d", p.a.RemoteDiscr(), p.b.RemoteDiscr())
	}
	p.run(2 * time.Second)
	if p.polls < 2 || p.finals < 2 {
		t.Errorf("%d packets with P and %d with F: want a Poll Sequence from each side", p.polls, p.finals)
	}
	if p.a.polling || p.b.polling {
		t.Errorf("Poll Sequence not ended by a Final: a %v, b %v", p.a.polling, p.b.polling)
	}
	if p.a.txInterval != 300*time.Millisecond || p.a.DetectionTime() != 900*time.Millisecond {
		t.Errorf("interval %s, detection time %s; want 300ms and 900ms", p.a.txInterval, p.a.DetectionTime())
	}
	// Sending at the configured interval, jitter at its largest: a
	// packet every 300 ms.
	before := p.a.txAt
	p.now = before
	p.a.Next(p.now)
	if got := p.a.txAt.Sub(before); got != 300*time.Millisecond {
		t.Errorf("next packet after %s, want 300ms", got)
	}
	if len(p.changes) != 3 {
		t.Errorf("the session flapped: %v", p.changes)
	}
}

// A session whose neighbour falls silent goes Down when the detection
// time runs out (diagnostic 1), forgets the neighbour, and falls back to
// the slow interval.
func TestSessionDetectsSilence(t *testing.T) {
	p := newPair(Settings{DesiredMinTx: 100 * time.Millisecond, RequiredMinRx: 100 * time.Millisecond, DetectMult: 3})
	p.a.txAt = p.now
	p.run(3 * time.Second)
	if p.a.State() != Up {
		t.Fatalf("not Up: %v", p.changes)
	}
	last := p.now
	// b falls silent: only a's clock runs and nothing reaches it.
	var change Change
	for p.now = last; p.now.Sub(last) < time.Second; p.now = p.now.Add(time.Millisecond) {
		if c, ok := p.a.Expire(p.now); ok {
			change = c
			break
		}
	}
	if change.To != Down || change.Diag != DiagTimeExpired {
		t.Fatalf("change %+v, want Down, detection time expired", change)
	}
	if gone := p.now.Sub(last); gone < 200*time.Millisecond || gone > 300*time.Millisecond {
		t.Errorf("Down %s after the last packet, want within the detection time 300ms", gone)
	}
	if p.a.RemoteDiscr() != 0 {
		t.Errorf("remote discriminator kept after expiry: %d", p.a.RemoteDiscr())
	}
	if got := p.a.Next(p.now); got.State != Down || got.Diag != DiagTimeExpired || got.DesiredMinTx != time.Second || got.YourDiscr != 0 {
		t.Errorf("packet after expiry: %+v", got)
	}
}

// The neighbour saying AdminDown takes an Up session Down with diagnostic
// 3; a Down session stays Down. A session told to Stop says AdminDown and
// ignores what it hears.
func TestSessionAdminDown(t *testing.T) {
	p := newPair(Defaults)
	p.a.txAt = p.now
	p.run(10 * time.Millisecond)
	p.b.Stop(p.now)
	pkt := p.b.Next(p.now)
	if pkt.State != AdminDown || pkt.Diag != DiagAdminDown {
		t.Fatalf("stopping session sends %+v", pkt)
	}
	c, ok := p.a.Receive(pkt, p.now)
	if !ok || c.To != Down || c.Diag != DiagNeighborDown || c.RemoteDiag != DiagAdminDown {
		t.Errorf("a on AdminDown: %+v %v", c, ok)
	}
	if _, ok := p.a.Receive(pkt, p.now); ok {
		t.Errorf("a Down session changed on AdminDown")
	}
	if _, ok := p.b.Receive(p.a.Next(p.now), p.now); ok || p.b.State() != AdminDown {
		t.Errorf("a stopped session left AdminDown: %s", p.b.State())
	}
}

// Packets that are not the session's change nothing: another
// discriminator, or none while the session is past Down. A neighbour
// saying Down takes an Up session Down.
func TestSessionDiscards(t *testing.T) {
	p := newPair(Defaults)
	p.a.txAt = p.now
	p.run(10 * time.Millisecond)
	detect := p.a.detectAt
	wrong := Packet{State: Down, DetectMult: 3, MyDiscr: 9, YourDiscr: 77, DesiredMinTx: time.Second, RequiredMinRx: time.Second}
	zero := wrong
	zero.YourDiscr = 0
	p.now = p.now.Add(100 * time.Millisecond)
	for _, pkt := range []Packet{wrong, zero} {
		if c, ok := p.a.Receive(pkt, p.now); ok || p.a.State() != Up {
			t.Errorf("%+v changed the session: %+v", pkt, c)
		}
	}
	if p.a.RemoteDiscr() != 2 || !p.a.detectAt.Equal(detect) {
		t.Errorf("a discarded packet changed the remote discriminator (%d) or restarted detection", p.a.RemoteDiscr())
	}
	down := wrong
	down.MyDiscr, down.YourDiscr = 2, 1
	if c, ok := p.a.Receive(down, p.now); !ok || c.To != Down || c.Diag != DiagNeighborDown {
		t.Errorf("neighbour Down: %+v %v", c, ok)
	}
}

// Transmit timing: the slow interval while not Up, the remote's
// RequiredMinRx when it is longer, 75 to 100 % jitter, an immediate Final
// for a Poll, and no periodic packets when the remote asks for none.
func TestSessionTransmitTiming(t *testing.T) {
	s := NewSession(1, Settings{DesiredMinTx: 50 * time.Millisecond, RequiredMinRx: 50 * time.Millisecond, DetectMult: 3})
	s.jitter = func() float64 { return 0 }
	s.Next(t0)
	if got := s.txAt.Sub(t0); got != 750*time.Millisecond {
		t.Errorf("Down, least jitter: next after %s, want 750ms (75 %% of 1s)", got)
	}
	s.Receive(Packet{State: Init, DetectMult: 3, MyDiscr: 5, YourDiscr: 1, DesiredMinTx: 50 * time.Millisecond, RequiredMinRx: 200 * time.Millisecond, Poll: true}, t0)
	if s.State() != Up {
		t.Fatalf("state %s", s.State())
	}
	if !s.SendNow(t0) {
		t.Fatal("no immediate packet after a change and a Poll")
	}
	if pkt := s.Next(t0); !pkt.Final || pkt.Poll {
		t.Errorf("answer to a Poll: %+v, want F without P", pkt)
	}
	if got := s.txAt.Sub(t0); got != 150*time.Millisecond {
		t.Errorf("remote RequiredMinRx 200ms: next after %s, want 150ms (75 %%)", got)
	}
	s.Receive(Packet{State: Up, DetectMult: 3, MyDiscr: 5, YourDiscr: 1, DesiredMinTx: 50 * time.Millisecond}, t0)
	if s.SendNow(t0.Add(time.Hour)) || !s.Wake(t0).Equal(s.detectAt) {
		t.Errorf("remote RequiredMinRx 0: periodic packets still due (wake %s)", s.Wake(t0))
	}
	m1 := NewSession(1, Settings{DesiredMinTx: time.Second, RequiredMinRx: time.Second, DetectMult: 1})
	m1.jitter = func() float64 { return 1 }
	m1.Next(t0)
	if got := m1.txAt.Sub(t0); got != 900*time.Millisecond {
		t.Errorf("multiplier 1, most jitter: next after %s, want 900ms", got)
	}
}

package bfd

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// State is a session's state (RFC 5880 section 4.1, "Sta").
type State uint8

// The states, as the wire writes them.
const (
	AdminDown State = 0
	Down      State = 1
	Init      State = 2
	Up        State = 3
)

func (s State) String() string {
	switch s {
	case AdminDown:
		return "AdminDown"
	case Down:
		return "Down"
	case Init:
		return "Init"
	case Up:
		return "Up"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// Diag is the diagnostic code: why a session last left Up (section 4.1).
type Diag uint8

// The diagnostics this implementation sets or acts on.
const (
	DiagNone         Diag = 0
	DiagTimeExpired  Diag = 1 // Control Detection Time Expired
	DiagNeighborDown Diag = 3 // Neighbor Signaled Session Down
	DiagPathDown     Diag = 5
	DiagAdminDown    Diag = 7 // Administratively Down
)

// diagNames are the meanings of the diagnostics RFC 5880 defines.
var diagNames = [...]string{
	"none", "detection time expired", "echo function failed", "neighbor signaled session down",
	"forwarding plane reset", "path down", "concatenated path down", "administratively down",
	"reverse concatenated path down",
}

func (d Diag) String() string {
	if int(d) < len(diagNames) {
		return diagNames[d]
	}
	return fmt.Sprintf("diagnostic %d", uint8(d))
}

// Version is the protocol version this implementation speaks.
const Version = 1

// packetLen is the length of a Control packet without authentication.
const packetLen = 24

// Packet is a BFD Control packet (section 4.1). Intervals are carried
// in microseconds on the wire.
type Packet struct {
	Diag  Diag
	State State
	// Poll and Final are the P and F bits of a Poll Sequence.
	Poll, Final bool
	// ControlPlaneIndependent is the C bit; Demand the D bit. The
	// agent sets neither.
	ControlPlaneIndependent, Demand bool
	// Auth is the A bit: an Authentication Section follows. This
	// implementation uses none and discards packets that carry one.
	Auth       bool
	DetectMult uint8
	MyDiscr    uint32
	YourDiscr  uint32
	// DesiredMinTx, RequiredMinRx and RequiredMinEchoRx are intervals;
	// on the wire they are microseconds.
	DesiredMinTx, RequiredMinRx, RequiredMinEchoRx time.Duration
}

// Errors of Parse: each is a reason RFC 5880 section 6.8.6 gives to
// discard a packet.
var (
	ErrShort         = errors.New("shorter than a BFD Control packet")
	ErrVersion       = errors.New("not BFD version 1")
	ErrLength        = errors.New("length field disagrees with the packet")
	ErrDetectMult    = errors.New("detect multiplier is zero")
	ErrMultipoint    = errors.New("multipoint bit set")
	ErrMyDiscr       = errors.New("my discriminator is zero")
	ErrAuthenticated = errors.New("authenticated, and this host uses no authentication")
)

// Marshal writes p as a Control packet without authentication.
func (p *Packet) Marshal() []byte {
	b := make([]byte, packetLen)
	b[0] = Version<<5 | byte(p.Diag&0x1f)
	b[1] = byte(p.State&3) << 6
	for _, f := range []struct {
		set bool
		bit byte
	}{{p.Poll, 0x20}, {p.Final, 0x10}, {p.ControlPlaneIndependent, 0x08}, {p.Auth, 0x04}, {p.Demand, 0x02}} {
		if f.set {
			b[1] |= f.bit
		}
	}
	b[2] = p.DetectMult
	b[3] = packetLen
	binary.BigEndian.PutUint32(b[4:], p.MyDiscr)
	binary.BigEndian.PutUint32(b[8:], p.YourDiscr)
	binary.BigEndian.PutUint32(b[12:], micros(p.DesiredMinTx))
	binary.BigEndian.PutUint32(b[16:], micros(p.RequiredMinRx))
	binary.BigEndian.PutUint32(b[20:], micros(p.RequiredMinEchoRx))
	return b
}

// Parse reads a Control packet and makes the checks of RFC 5880 section
// 6.8.6 that need no session: a packet that fails one is to be discarded.
func Parse(b []byte) (Packet, error) {
	if len(b) < packetLen {
		return Packet{}, ErrShort
	}
	if b[0]>>5 != Version {
		return Packet{}, ErrVersion
	}
	p := Packet{
		Diag:                    Diag(b[0] & 0x1f),
		State:                   State(b[1] >> 6),
		Poll:                    b[1]&0x20 != 0,
		Final:                   b[1]&0x10 != 0,
		ControlPlaneIndependent: b[1]&0x08 != 0,
		Auth:                    b[1]&0x04 != 0,
		Demand:                  b[1]&0x02 != 0,
		DetectMult:              b[2],
		MyDiscr:                 binary.BigEndian.Uint32(b[4:]),
		YourDiscr:               binary.BigEndian.Uint32(b[8:]),
		DesiredMinTx:            fromMicros(binary.BigEndian.Uint32(b[12:])),
		RequiredMinRx:           fromMicros(binary.BigEndian.Uint32(b[16:])),
		RequiredMinEchoRx:       fromMicros(binary.BigEndian.Uint32(b[20:])),
	}
	minLen := packetLen
	if p.Auth {
		minLen = packetLen + 2
	}
	switch n := int(b[3]); {
	case n < minLen || n > len(b):
		return Packet{}, ErrLength
	case p.DetectMult == 0:
		return Packet{}, ErrDetectMult
	case b[1]&0x01 != 0:
		return Packet{}, ErrMultipoint
	case p.MyDiscr == 0:
		return Packet{}, ErrMyDiscr
	case p.Auth:
		return Packet{}, ErrAuthenticated
	}
	return p, nil
}

func micros(d time.Duration) uint32 {
	us := d / time.Microsecond
	if us > 0xffffffff {
		return 0xffffffff
	}
	return uint32(us)
}

func fromMicros(us uint32) time.Duration { return time.Duration(us) * time.Microsecond }

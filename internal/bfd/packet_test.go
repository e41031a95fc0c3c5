package bfd

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A packet survives Marshal and Parse, and its wire form is RFC 5880's
// (section 4.1), byte for byte.
func TestPacketWireForm(t *testing.T) {
	p := Packet{
		Diag: DiagTimeExpired, State: Up, Poll: true, DetectMult: 3, MyDiscr: 0x01020304, YourDiscr: 0x0a0b0c0d,
		DesiredMinTx: 300 * time.Millisecond, RequiredMinRx: 100 * time.Millisecond,
	}
	b := p.Marshal()
	want := []byte{
		0x21,  // version 1, diagnostic 1
		0xe0,  // state Up (3), P
		3, 24, // multiplier, length
		1, 2, 3, 4, // my discriminator
		0x0a, 0x0b, 0x0c, 0x0d, // your discriminator
		0x00, 0x04, 0x93, 0xe0, // 300000 µs
		0x00, 0x01, 0x86, 0xa0, // 100000 µs
		0, 0, 0, 0, // no echo
	}
	if diff := cmp.Diff(want, b); diff != "" {
		t.Errorf("wire form (-want +got):\n%s", diff)
	}
	got, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(p, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	p.Poll, p.Final = false, true
	if got, _ := Parse(p.Marshal()); !got.Final || got.Poll {
		t.Errorf("F bit: %+v", got)
	}
}

// Parse refuses each packet RFC 5880 section 6.8.6 says to discard
// before looking for a session.
func TestParseDiscards(t *testing.T) {
	good := (&Packet{State: Down, DetectMult: 3, MyDiscr: 7, DesiredMinTx: time.Second, RequiredMinRx: time.Second}).Marshal()
	if _, err := Parse(good); err != nil {
		t.Fatalf("a valid packet: %v", err)
	}
	edit := func(f func(b []byte) []byte) []byte {
		b := append([]byte(nil), good...)
		return f(b)
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"short", good[:23], ErrShort},
		{"version 0", edit(func(b []byte) []byte { b[0] &^= 0xe0; return b }), ErrVersion},
		{"version 2", edit(func(b []byte) []byte { b[0] = 2<<5 | b[0]&0x1f; return b }), ErrVersion},
		{"length below 24", edit(func(b []byte) []byte { b[3] = 20; return b }), ErrLength},
		{"length beyond the packet", edit(func(b []byte) []byte { b[3] = 30; return b }), ErrLength},
		{"multiplier 0", edit(func(b []byte) []byte { b[2] = 0; return b }), ErrDetectMult},
		{"multipoint", edit(func(b []byte) []byte { b[1] |= 0x01; return b }), ErrMultipoint},
		{"my discriminator 0", edit(func(b []byte) []byte { copy(b[4:8], []byte{0, 0, 0, 0}); return b }), ErrMyDiscr},
		{"authenticated", edit(func(b []byte) []byte { b[1] |= 0x04; b[3] = 26; return append(b, 1, 2) }), ErrAuthenticated},
	} {
		if _, err := Parse(tc.b); !errors.Is(err, tc.want) {
			t.Errorf("%s: Parse = %v, want %v", tc.name, err, tc.want)
		}
	}
	// A longer datagram whose length field says 24 is a packet of 24.
	if _, err := Parse(append(append([]byte(nil), good...), 0, 0)); err != nil {
		t.Errorf("trailing bytes beyond the length field: %v", err)
	}
}

func TestNames(t *testing.T) {
	for s, want := range map[State]string{AdminDown: "AdminDown", Down: "Down", Init: "Init", Up: "Up"} {
		if s.String() != want {
			t.Errorf("%d: %q", s, s.String())
		}
	}
	if DiagAdminDown.String() != "administratively down" || Diag(30).String() != "diagnostic 30" {
		t.Errorf("diagnostics: %q %q", DiagAdminDown, Diag(30))
	}
}

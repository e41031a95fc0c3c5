package vip

import (
	"encoding/hex"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/groundcloud/groundcloud/internal/frames"
)

var testMAC = net.HardwareAddr{0x02, 0x42, 0xc0, 0x00, 0x02, 0x01}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestARPAnnouncement(t *testing.T) {
	got := announcement(testMAC, netip.MustParseAddr("192.0.2.100"))
	want := unhex(t, `
		ffffffffffff 0242c0000201 0806
		0001 0800 06 04 0001
		0242c0000201 c0000264
		000000000000 c0000264
		000000000000000000000000000000000000`)
	if hex.EncodeToString(got) != hex.EncodeToString(want) {
		t.Errorf("ARP announcement\n got %x\nwant %x", got, want)
	}
}

func TestUnsolicitedNA(t *testing.T) {
	vip := netip.MustParseAddr("2001:db8:1::100")
	got := announcement(testMAC, vip)
	want := unhex(t, `
		333300000001 0242c0000201 86dd
		60000000 0020 3a ff
		20010db8000100000000000000000100
		ff020000000000000000000000000001
		88 00 0000 20000000
		20010db8000100000000000000000100
		02 01 0242c0000201`)
	if len(got) != len(want) {
		t.Fatalf("NA is %d bytes, want %d", len(got), len(want))
	}
	// The checksum (bytes 56-57) is checked separately below.
	copy(want[56:58], got[56:58])
	if hex.EncodeToString(got) != hex.EncodeToString(want) {
		t.Errorf("NA\n got %x\nwant %x", got, want)
	}
	// A correct checksum makes the sum over pseudo-header and message zero.
	if c := frames.ICMPv6Checksum(vip.As16(), allNodes.As16(), got[54:]); c != 0 {
		t.Errorf("checksum does not verify: residue %#04x", c)
	}
}

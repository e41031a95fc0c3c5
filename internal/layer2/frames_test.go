package layer2

import (
	"encoding/hex"
	"net"
	"net/netip"
	"strings"
	"testing"
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
	if c := icmpv6Checksum(vip.As16(), allNodes.As16(), got[54:]); c != 0 {
		t.Errorf("checksum does not verify: residue %#04x", c)
	}
}

func TestICMPv6ChecksumKnownValue(t *testing.T) {
	// An echo request ::1 -> ::1, id 0, seq 0, no data; by hand:
	// 0x8000 + 0x0001 + 0x0001 + 0x0008 (length) + 0x003a (next header)
	// = 0x8044, complemented 0x7fbb.
	src := netip.MustParseAddr("::1").As16()
	msg := []byte{128, 0, 0, 0, 0, 0, 0, 0}
	if got, want := icmpv6Checksum(src, src, msg), uint16(0x7fbb); got != want {
		t.Errorf("checksum = %#04x, want %#04x", got, want)
	}
}

func TestMulticastMAC(t *testing.T) {
	for g, want := range map[string]string{"ff02::1": "33:33:00:00:00:01", "ff02::1:ff00:c8": "33:33:ff:00:00:c8"} {
		if got := multicastMAC(netip.MustParseAddr(g)).String(); got != want {
			t.Errorf("multicastMAC(%s) = %s, want %s", g, got, want)
		}
	}
}

func TestARPRequest(t *testing.T) {
	mac := net.HardwareAddr{2, 0x42, 0xc0, 0, 2, 1}
	f := arpRequest(mac, netip.IPv4Unspecified(), netip.MustParseAddr("192.0.2.200"))
	if len(f) != ethMinLen || net.HardwareAddr(f[:6]).String() != ethBroadcast.String() || f[12] != 0x08 || f[13] != 0x06 || f[21] != 1 {
		t.Fatalf("frame % x", f)
	}
	if got := netip.AddrFrom4([4]byte(f[28:32])); !got.IsUnspecified() {
		t.Errorf("sender protocol address %s", got)
	}
	if got := netip.AddrFrom4([4]byte(f[38:42])); got != netip.MustParseAddr("192.0.2.200") {
		t.Errorf("target protocol address %s", got)
	}
}

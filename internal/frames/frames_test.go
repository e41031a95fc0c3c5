package frames

import (
	"net"
	"net/netip"
	"testing"
)

func TestICMPv6ChecksumKnownValue(t *testing.T) {
	// An echo request ::1 -> ::1, id 0, seq 0, no data; by hand:
	// 0x8000 + 0x0001 + 0x0001 + 0x0008 (length) + 0x003a (next header)
	// = 0x8044, complemented 0x7fbb.
	src := netip.MustParseAddr("::1").As16()
	msg := []byte{128, 0, 0, 0, 0, 0, 0, 0}
	if got, want := ICMPv6Checksum(src, src, msg), uint16(0x7fbb); got != want {
		t.Errorf("checksum = %#04x, want %#04x", got, want)
	}
}

func TestMulticastMAC(t *testing.T) {
	for g, want := range map[string]string{"ff02::1": "33:33:00:00:00:01", "ff02::1:ff00:c8": "33:33:ff:00:00:c8"} {
		if got := MulticastMAC(netip.MustParseAddr(g)).String(); got != want {
			t.Errorf("MulticastMAC(%s) = %s, want %s", g, got, want)
		}
	}
}

func TestARPRequest(t *testing.T) {
	mac := net.HardwareAddr{2, 0x42, 0xc0, 0, 2, 1}
	f := ARPRequest(mac, netip.IPv4Unspecified(), netip.MustParseAddr("192.0.2.200"))
	if len(f) != MinLen || net.HardwareAddr(f[:6]).String() != Broadcast.String() || f[12] != 0x08 || f[13] != 0x06 || f[21] != 1 {
		t.Fatalf("frame % x", f)
	}
	if got := netip.AddrFrom4([4]byte(f[28:32])); !got.IsUnspecified() {
		t.Errorf("sender protocol address %s", got)
	}
	if got := netip.AddrFrom4([4]byte(f[38:42])); got != netip.MustParseAddr("192.0.2.200") {
		t.Errorf("target protocol address %s", got)
	}
}

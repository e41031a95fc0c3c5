package layer2

import (
	"net"
	"net/netip"
	"testing"
)

func TestARPFrames(t *testing.T) {
	self, _ := net.ParseMAC("02:00:00:00:00:01")
	other, _ := net.ParseMAC("02:00:00:00:00:02")
	v := netip.MustParseAddr("192.0.2.200")

	probe := arpProbe(other, v)
	if len(probe) != ethMinLen {
		t.Fatalf("probe is %d bytes", len(probe))
	}
	p, ok := parseARP(probe)
	if !ok || p.op != arpOpRequest || !p.spa.IsUnspecified() || p.tpa != v || p.sha.String() != other.String() {
		t.Fatalf("parse probe: %+v %v", p, ok)
	}

	client := netip.MustParseAddr("192.0.2.50")
	node := netip.MustParseAddr("192.0.2.11")
	tests := []struct {
		name string
		p    arpPacket
		want Claim // the zero Claim: none
	}{
		{"another agent's probe", arpPacket{arpOpRequest, other, netip.IPv4Unspecified(), v}, Claim{v, other.String(), true}},
		{"another agent's announcement", arpPacket{arpOpRequest, other, v, v}, Claim{v, other.String(), true}},
		{"another kernel's reply", arpPacket{arpOpReply, other, v, client}, Claim{v, other.String(), false}},
		{"another kernel asking from the address", arpPacket{arpOpRequest, other, v, node}, Claim{v, other.String(), false}},
		{"a client asking for it claims its own address", arpPacket{arpOpRequest, other, client, v}, Claim{client, other.String(), false}},
		{"our own frame", arpPacket{arpOpRequest, self, v, v}, Claim{}},
		{"another operation", arpPacket{3, other, v, v}, Claim{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := claimARP(tt.p, self)
			if ok != (tt.want != Claim{}) || got != tt.want {
				t.Errorf("claimARP = %+v %v, want %+v", got, ok, tt.want)
			}
		})
	}
	if _, ok := parseARP(probe[:20]); ok {
		t.Error("a short frame parsed")
	}
}

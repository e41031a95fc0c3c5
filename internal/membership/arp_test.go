package membership

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/groundcloud/groundcloud/internal/frames"
)

func TestARPFrames(t *testing.T) {
	self, _ := net.ParseMAC("02:00:00:00:00:01")
	other, _ := net.ParseMAC("02:00:00:00:00:02")
	v := netip.MustParseAddr("192.0.2.200")
	vips := map[netip.Addr]bool{v: true}
	now := time.Unix(0, 0)

	probe := arpProbe(other, v)
	if len(probe) != frames.MinLen {
		t.Fatalf("probe is %d bytes", len(probe))
	}
	p, ok := parseARP(probe)
	if !ok || p.op != arpRequest || !p.spa.IsUnspecified() || p.tpa != v || p.sha.String() != other.String() {
		t.Fatalf("parse probe: %+v %v", p, ok)
	}

	client := netip.MustParseAddr("192.0.2.50")
	node := netip.MustParseAddr("192.0.2.11")
	tests := []struct {
		name   string
		p      arpPacket
		want   bool
		active bool
	}{
		{"another agent's probe", arpPacket{arpRequest, other, netip.IPv4Unspecified(), v}, true, true},
		{"another agent's announcement", arpPacket{arpRequest, other, v, v}, true, true},
		{"another kernel's reply", arpPacket{arpReply, other, v, client}, true, false},
		{"another kernel asking from the address", arpPacket{arpRequest, other, v, node}, true, false},
		{"a client asking for it", arpPacket{arpRequest, other, client, v}, false, false},
		{"our own frame", arpPacket{arpRequest, self, v, v}, false, false},
		{"another address", arpPacket{arpReply, other, client, node}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ok := classify(tt.p, self, vips, now)
			if ok != tt.want || ok && (s.Active != tt.active || s.VIP != v || s.MAC != other.String()) {
				t.Errorf("classify: %+v %v, want ok=%v active=%v", s, ok, tt.want, tt.active)
			}
		})
	}
	if _, ok := parseARP(probe[:20]); ok {
		t.Error("a short frame parsed")
	}
}

package health

import (
	"net/netip"
	"testing"
)

func TestTargetURL(t *testing.T) {
	tests := []struct {
		target Target
		want   string
	}{
		{Target{netip.MustParseAddr("192.0.2.10"), 10256, "/healthz", false}, "http://192.0.2.10:10256/healthz"},
		{Target{netip.MustParseAddr("2001:db8::1"), 32000, "/healthz", false}, "http://[2001:db8::1]:32000/healthz"},
		{Target{netip.MustParseAddr("192.0.2.10"), 80, "", false}, "http://192.0.2.10:80/"},
		{Target{netip.MustParseAddr("192.0.2.10"), 80, "livez", false}, "http://192.0.2.10:80/livez"},
		{Target{netip.MustParseAddr("fe80::1%eth0"), 80, "/", false}, "http://[fe80::1%25eth0]:80/"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.target.URL(); got != tt.want {
				t.Errorf("URL() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestTargetString(t *testing.T) {
	addr := netip.MustParseAddr("192.0.2.10")
	for _, tc := range []struct {
		target Target
		want   string
	}{
		{Target{Addr: addr, Port: 10256, Path: "/healthz"}, "192.0.2.10:10256/healthz"},
		{Target{Addr: addr, Port: 30080, TCP: true}, "tcp:192.0.2.10:30080"},
	} {
		if got := tc.target.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
	}
}

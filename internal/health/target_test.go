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
		{Target{netip.MustParseAddr("192.0.2.10"), 10256, "/healthz"}, "http://192.0.2.10:10256/healthz"},
		{Target{netip.MustParseAddr("2001:db8::1"), 32000, "/healthz"}, "http://[2001:db8::1]:32000/healthz"},
		{Target{netip.MustParseAddr("192.0.2.10"), 80, ""}, "http://192.0.2.10:80/"},
		{Target{netip.MustParseAddr("192.0.2.10"), 80, "livez"}, "http://192.0.2.10:80/livez"},
		{Target{netip.MustParseAddr("fe80::1%eth0"), 80, "/"}, "http://[fe80::1%25eth0]:80/"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.target.URL(); got != tt.want {
				t.Errorf("URL() = %q, want %q", got, tt.want)
			}
		})
	}
}

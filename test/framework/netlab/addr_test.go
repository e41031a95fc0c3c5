package netlab

import (
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestAddrPool(t *testing.T) {
	a := netip.MustParseAddr
	tests := []struct {
		name   string
		subnet string
		want   []string // addresses asked for in turn; "" for the next free
		got    []string // results; "error" for a failure
	}{
		{
			name:   "ipv4 hands out from .2, skipping taken ones",
			subnet: "192.0.2.0/24",
			want:   []string{"", "192.0.2.4", "", "", ""},
			got:    []string{"192.0.2.2", "192.0.2.4", "192.0.2.3", "192.0.2.5", "192.0.2.6"},
		},
		{
			name:   "ipv6 hands out from ::2",
			subnet: "2001:db8:0:1::/64",
			want:   []string{"", ""},
			got:    []string{"2001:db8:0:1::2", "2001:db8:0:1::3"},
		},
		{
			name:   "network, gateway, broadcast, outside and taken are refused",
			subnet: "192.0.2.0/24",
			want:   []string{"192.0.2.0", "192.0.2.1", "192.0.2.255", "198.51.100.7", "192.0.2.9", "192.0.2.9"},
			got:    []string{"error", "error", "error", "error", "192.0.2.9", "error"},
		},
		{
			name:   "a /30 holds one host",
			subnet: "192.0.2.0/30",
			want:   []string{"", ""},
			got:    []string{"192.0.2.2", "error"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newAddrPool(netip.MustParsePrefix(tt.subnet))
			for i, w := range tt.want {
				var want netip.Addr
				if w != "" {
					want = a(w)
				}
				got, err := p.take(want)
				gotS := got.String()
				if err != nil {
					gotS = "error"
				}
				if gotS != tt.got[i] {
					t.Errorf("take(%q) #%d = %s (%v), want %s", w, i, gotS, err, tt.got[i])
				}
			}
		})
	}
}

func TestCheckSubnet(t *testing.T) {
	tests := []struct {
		name    string
		subnet  string
		is4     bool
		wantErr string
	}{
		{name: "default v4", subnet: "192.0.2.0/24", is4: true},
		{name: "default v6", subnet: "2001:db8:0:1::/64"},
		{name: "v6 given as v4", subnet: "2001:db8::/64", is4: true, wantErr: "not an IPv4 prefix"},
		{name: "host bits", subnet: "192.0.2.1/24", is4: true, wantErr: "host bits set"},
		{name: "too small", subnet: "192.0.2.0/31", is4: true, wantErr: "too small"},
		{name: "mapped v4", subnet: "::ffff:192.0.2.0/120", wantErr: "not an IPv6 prefix"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkSubnet("subnet", netip.MustParsePrefix(tt.subnet), tt.is4)
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("checkSubnet(%s) = %v, want error containing %q", tt.subnet, err, tt.wantErr)
			}
		})
	}
}

func TestRunPID(t *testing.T) {
	tests := []struct {
		name   string
		ns     string
		want   int
		wantOK bool
	}{
		{name: "run prefix", ns: "gclab4711x03fa-node1", want: 4711, wantOK: true},
		{name: "switch", ns: "gclab12x0000-switch", want: 12, wantOK: true},
		{name: "other family", ns: "gcdp4711-node1"},
		{name: "longer family", ns: "gclabx4711x03fa-node1"},
		{name: "no pid", ns: "gclabx03fa-node1"},
		{name: "signed pid", ns: "gclab+12x0000-node1"},
		{name: "no host", ns: "gclab4711x03fa"},
		{name: "fixed prefix", ns: "gclab-node1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := runPID(DefaultFamily, tt.ns)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("runPID(%q) = %d, %t; want %d, %t", tt.ns, got, ok, tt.want, tt.wantOK)
			}
		})
	}
	prefix := RunPrefix(DefaultFamily)
	if !prefixRE.MatchString(prefix) {
		t.Errorf("RunPrefix = %q, not a valid prefix", prefix)
	}
	if got, ok := runPID(DefaultFamily, prefix+"-h"); !ok || got != os.Getpid() {
		t.Errorf("runPID(RunPrefix) = %d, %t; want %s", got, ok, strconv.Itoa(os.Getpid()))
	}
}

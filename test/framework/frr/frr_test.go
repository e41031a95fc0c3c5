package frr

import (
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// The shape of FRR 8.4's "show ip route <prefix> json".
const routeJSON = `{"198.51.100.1/32":[{"prefix":"198.51.100.1/32","prefixLen":32,"protocol":"bgp","selected":true,
"destSelected":true,"distance":20,"installed":true,"table":254,"nexthops":[
{"flags":3,"fib":true,"ip":"192.0.2.4","afi":"ipv4","interfaceIndex":2,"interfaceName":"eth0","active":true,"weight":1},
{"flags":3,"fib":true,"ip":"192.0.2.2","afi":"ipv4","interfaceIndex":2,"interfaceName":"eth0","active":true,"weight":1},
{"flags":1,"ip":"192.0.2.3","afi":"ipv4","interfaceIndex":2,"interfaceName":"eth0","active":true,"weight":1}]},
{"prefix":"198.51.100.1/32","protocol":"static","selected":false,"installed":false,"nexthops":[{"fib":true,"ip":"192.0.2.9"}]}]}`

func TestParseNexthops(t *testing.T) {
	p := netip.MustParsePrefix("198.51.100.1/32")
	for _, tt := range []struct {
		name string
		in   string
		want []netip.Addr
	}{
		{"the installed next hops of the selected route, sorted", routeJSON,
			[]netip.Addr{netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("192.0.2.4")}},
		{"no route", `{}`, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseNexthops([]byte(tt.in), p)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateComparable(netip.Addr{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("ParseNexthops (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := ParseNexthops([]byte("% Unknown command"), p); err == nil {
		t.Error("no error for output that is not JSON")
	}
}

func TestRemoveDir(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	mine, err := os.MkdirTemp("", dirPrefix+"*")
	if err != nil {
		t.Fatal(err)
	}
	other, err := os.MkdirTemp("", "other-*")
	if err != nil {
		t.Fatal(err)
	}
	nested := filepath.Join(other, dirPrefix+"1")
	if err := os.Mkdir(nested, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		dir     string
		wantErr bool
		gone    bool
	}{
		{"a router's directory", mine, false, true},
		{"another directory of the temporary directory", other, true, false},
		{"a router-like name elsewhere", nested, true, false},
		{"a relative path", dirPrefix + "1", true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := RemoveDir(tt.dir)
			if (err != nil) != tt.wantErr {
				t.Errorf("RemoveDir(%s) = %v, want error %v", tt.dir, err, tt.wantErr)
			}
			if _, serr := os.Stat(tt.dir); errors.Is(serr, fs.ErrNotExist) != tt.gone && filepath.IsAbs(tt.dir) {
				t.Errorf("%s removed: %v, want %v", tt.dir, !tt.gone, tt.gone)
			}
		})
	}
}

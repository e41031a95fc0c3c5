package netlab

import (
	"net/netip"
	"strings"
	"testing"
)

// TestAddHostBehind: a host behind a router reaches a lab host that routes
// its network back through the router, over IPv4 and IPv6, with its own
// address as the source; its network may not overlap the lab's.
func TestAddHostBehind(t *testing.T) {
	l := NewT(t, Options{})
	gw := l.AddHostT(t, "gw", HostOptions{})
	server := l.AddHostT(t, "server", HostOptions{})
	net4, net6 := netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("2001:db8:ffff::/64")
	if _, err := l.AddHostBehind(t.Context(), "bad", gw, netip.MustParsePrefix("192.0.2.128/25"), net6); err == nil || !strings.Contains(err.Error(), "overlap") {
		t.Errorf("AddHostBehind with a network inside the lab's: %v, want an overlap error", err)
	}
	runner, err := l.AddHostBehind(t.Context(), "runner", gw, net4, net6)
	if err != nil {
		t.Fatal(err)
	}
	if runner.Addr4 != netip.MustParseAddr("203.0.113.2") || runner.Addr6 != netip.MustParseAddr("2001:db8:ffff::2") {
		t.Errorf("runner's addresses %s %s, want the second of each network", runner.Addr4, runner.Addr6)
	}
	if runner.Prefix4() != netip.MustParsePrefix("203.0.113.2/24") {
		t.Errorf("runner.Prefix4() = %s", runner.Prefix4())
	}
	serveEcho(t, server, echoPort)
	for _, r := range []struct {
		dst netip.Prefix
		via netip.Addr
	}{{net4, gw.Addr4}, {net6, gw.Addr6}} {
		if out, err := server.Command(t.Context(), "ip", "route", "add", r.dst.String(), "via", r.via.String()).CombinedOutput(); err != nil {
			t.Fatalf("route on server: %v: %s", err, out)
		}
	}
	for _, dst := range []netip.Addr{server.Addr4, server.Addr6} {
		got, err := tcpExchange(t.Context(), runner, netip.AddrPortFrom(dst, echoPort))
		if err != nil {
			t.Fatalf("runner to %s: %v", dst, err)
		}
		src := runner.Addr4
		if dst.Is6() {
			src = runner.Addr6
		}
		if want := "server " + addrPortPrefix(src); !strings.HasPrefix(got, want) {
			t.Errorf("runner to %s: got %q, want %q...", dst, got, want)
		}
	}
}

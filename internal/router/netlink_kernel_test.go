package router

import (
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"

	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

// TestNetlinkTable programs routes in a host of a lab: IPv4 and IPv6, next
// hops on the host's link, a route of another protocol to a destination we
// want (left alone and reported), one to a destination we do not want
// (never touched), a moved next hop, a restart and stale routes.
func TestNetlinkTable(t *testing.T) {
	l := netlab.NewT(t, netlab.Options{})
	r := l.AddHostT(t, "r", netlab.HostOptions{Forwarding: true})
	n2 := l.AddHostT(t, "n2", netlab.HostOptions{})
	n3 := l.AddHostT(t, "n3", netlab.HostOptions{})
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", append([]string{"-n", r.Netns}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	// Someone else's routes: one to a pod CIDR we will want, one elsewhere.
	ip("route", "add", "10.244.3.0/24", "via", n3.Addr4.String(), "proto", "static")
	ip("-6", "route", "add", "fd00:10:244:3::/64", "via", n3.Addr6.String(), "proto", "static")
	ip("route", "add", "198.51.100.0/24", "via", n2.Addr4.String(), "proto", "static")
	foreign := routesOf(t, r, "static")

	table := newTable(t, r)
	w := func(dst string, via netip.Addr) Want {
		return Want{Dst: netip.MustParsePrefix(dst), Via: via, Name: dst}
	}
	wants := []Want{
		w("10.244.2.0/24", n2.Addr4), w("10.244.3.0/24", n3.Addr4),
		w("fd00:10:244:2::/64", n2.Addr6), w("fd00:10:244:3::/64", n3.Addr6),
	}
	failed := syncTable(t, table, wants)
	for _, dst := range []string{"10.244.3.0/24", "fd00:10:244:3::/64"} {
		if err := failed[netip.MustParsePrefix(dst)]; !errors.Is(err, ErrForeignRoute) {
			t.Errorf("%s: %v, want ErrForeignRoute", dst, err)
		}
	}
	if len(failed) != 2 {
		t.Errorf("failed: %v", failed)
	}
	expectOurs(t, r, fmt.Sprintf("10.244.2.0/24 via %s", n2.Addr4), fmt.Sprintf("fd00:10:244:2::/64 via %s", n2.Addr6))
	if diff := cmp.Diff(foreign, routesOf(t, r, "static")); diff != "" {
		t.Errorf("routes of another protocol changed (-before +after):\n%s", diff)
	}

	// The foreign routes go: ours take their place at the next sync.
	ip("route", "del", "10.244.3.0/24", "proto", "static")
	ip("-6", "route", "del", "fd00:10:244:3::/64", "proto", "static")
	if failed := syncTable(t, table, wants); len(failed) > 0 {
		t.Fatalf("second sync: %v", failed)
	}
	// A next hop moves.
	wants[0].Via = n3.Addr4
	wants[2].Via = n3.Addr6
	if failed := syncTable(t, table, wants); len(failed) > 0 {
		t.Fatalf("sync after a move: %v", failed)
	}
	all := []string{
		fmt.Sprintf("10.244.2.0/24 via %s", n3.Addr4), fmt.Sprintf("10.244.3.0/24 via %s", n3.Addr4),
		fmt.Sprintf("fd00:10:244:2::/64 via %s", n3.Addr6), fmt.Sprintf("fd00:10:244:3::/64 via %s", n3.Addr6),
	}
	expectOurs(t, r, all...)

	// A restarted router (a new handle) finds nothing to do; one of its
	// routes deleted by hand comes back, once.
	table = newTable(t, r)
	if p := plan(t, table, wants); !p.Empty() {
		t.Errorf("after a restart: %+v, want nothing to do", p)
	}
	ip("route", "del", "10.244.2.0/24")
	if failed := syncTable(t, table, wants); len(failed) > 0 {
		t.Fatal(failed)
	}
	expectOurs(t, r, all...)

	// Stale routes go; the foreign one elsewhere stays.
	if failed := syncTable(t, table, wants[1:2]); len(failed) > 0 {
		t.Fatal(failed)
	}
	expectOurs(t, r, all[1])
	if got := routesOf(t, r, "static"); len(got) != 1 || !strings.HasPrefix(got[0], "198.51.100.0/24") {
		t.Errorf("routes of another protocol: %q", got)
	}
}

func newTable(t *testing.T, h *netlab.Host) *NetlinkTable {
	t.Helper()
	var handle *netlink.Handle
	if err := h.Do(func() (err error) { handle, err = netlink.NewHandle(); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(handle.Close)
	return NewNetlinkTable(handle, DefaultProtocol)
}

func plan(t *testing.T, table *NetlinkTable, wants []Want) Plan {
	t.Helper()
	have, err := table.List()
	if err != nil {
		t.Fatal(err)
	}
	return Diff(wants, have)
}

func syncTable(t *testing.T, table *NetlinkTable, wants []Want) map[netip.Prefix]error {
	t.Helper()
	return table.Apply(plan(t, table, wants))
}

// routesOf lists the host's routes of a protocol as `ip` prints them.
func routesOf(t *testing.T, h *netlab.Host, proto string) []string {
	t.Helper()
	var out []string
	for _, family := range []string{"-4", "-6"} {
		b, err := exec.Command("ip", "-n", h.Netns, family, "route", "show", "proto", proto).CombinedOutput()
		if err != nil {
			t.Fatalf("ip route show: %v: %s", err, b)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if line != "" {
				out = append(out, strings.Join(strings.Fields(line)[:3], " "))
			}
		}
	}
	return out
}

// expectOurs checks the routes of our protocol, each exactly once.
func expectOurs(t *testing.T, h *netlab.Host, want ...string) {
	t.Helper()
	if diff := cmp.Diff(want, routesOf(t, h, fmt.Sprint(DefaultProtocol))); diff != "" {
		t.Errorf("routes of protocol %d (-want +got):\n%s", DefaultProtocol, diff)
	}
}

// TestNetlinkTableWatch watches a lab host's kernel: a route of ours
// deleted by hand, the host's link going down (the kernel drops the routes
// over it) and coming back, and a route of another protocol going away
// are each told; adding routes of ours is not. After the link is back, a
// sync puts every route back.
func TestNetlinkTableWatch(t *testing.T) {
	l := netlab.NewT(t, netlab.Options{})
	r := l.AddHostT(t, "r", netlab.HostOptions{Forwarding: true})
	n2 := l.AddHostT(t, "n2", netlab.HostOptions{})
	table := newTable(t, r)
	events := make(chan struct{}, 1)
	if err := r.Do(func() error {
		return table.Watch(t.Context(), func() {
			select {
			case events <- struct{}{}:
			default:
			}
		})
	}); err != nil {
		t.Fatal(err)
	}
	told := func(what string) {
		t.Helper()
		select {
		case <-events:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: not told within 10 s", what)
		}
	}
	// drain forgets what earlier steps caused; none expects nothing for a
	// second.
	drain := func() {
		time.Sleep(200 * time.Millisecond)
		select {
		case <-events:
		default:
		}
	}
	none := func(what string) {
		t.Helper()
		select {
		case <-events:
			t.Fatalf("%s: told of a change", what)
		case <-time.After(time.Second):
		}
	}
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", append([]string{"-n", r.Netns}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	wants := []Want{
		{Dst: netip.MustParsePrefix("10.244.2.0/24"), Via: n2.Addr4, Name: "v4"},
		{Dst: netip.MustParsePrefix("fd00:10:244:2::/64"), Via: n2.Addr6, Name: "v6"},
	}
	all := []string{fmt.Sprintf("10.244.2.0/24 via %s", n2.Addr4), fmt.Sprintf("fd00:10:244:2::/64 via %s", n2.Addr6)}
	drain()
	none("nothing happened")
	if failed := syncTable(t, table, wants); len(failed) > 0 {
		t.Fatal(failed)
	}
	expectOurs(t, r, all...)
	none("routes of ours added")

	ip("route", "del", "10.244.2.0/24")
	told("a route of ours deleted by hand")
	if failed := syncTable(t, table, wants); len(failed) > 0 {
		t.Fatal(failed)
	}
	expectOurs(t, r, all...)

	drain()
	if err := r.SetLink(false); err != nil {
		t.Fatal(err)
	}
	told("the link down")
	if got := routesOf(t, r, fmt.Sprint(DefaultProtocol)); slices.Contains(got, all[0]) {
		t.Fatalf("the kernel kept %q over a link that is down: %q", all[0], got)
	}
	// Nothing can be put back while it is down.
	if failed := syncTable(t, table, wants); len(failed) == 0 {
		t.Error("routes added over a link that is down")
	}
	drain()
	if err := r.SetLink(true); err != nil {
		t.Fatal(err)
	}
	told("the link up")
	if failed := syncTable(t, table, wants); len(failed) > 0 {
		t.Fatal(failed)
	}
	expectOurs(t, r, all...)

	drain()
	ip("route", "add", "198.51.100.0/24", "via", n2.Addr4.String(), "proto", "static")
	told("another protocol's route added")
	ip("route", "del", "198.51.100.0/24", "proto", "static")
	told("another protocol's route deleted")
}

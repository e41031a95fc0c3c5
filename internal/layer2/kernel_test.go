package layer2

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2/ktesting"

	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

var wrongMAC = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x00, 0x99}

// kernelSubnet6 is the lab's IPv6 subnet: the virtual IPs below are in it,
// so that b reaches them on its link.
var kernelSubnet6 = netip.MustParsePrefix("2001:db8:1::/64")

// newKernelLab returns two hosts on one segment: a, whose eth0 a Manager
// works on, and b, a client. Both have an IPv4 and an IPv6 address from the
// lab, as an operator would have configured them.
func newKernelLab(t *testing.T) (a, b *netlab.Host) {
	t.Helper()
	l := netlab.NewT(t, netlab.Options{Subnet6: kernelSubnet6}) // skips with -short or without root
	return l.AddHostT(t, "a", netlab.HostOptions{}), l.AddHostT(t, "b", netlab.HostOptions{})
}

// TestManagerKernel runs a Manager on eth0 of host a, with b as a client on
// the same link.
func TestManagerKernel(t *testing.T) {
	a, b := newKernelLab(t)
	// Someone else's addresses on the same interface; one of them is also
	// wanted as a virtual IP.
	foreign := []string{"192.0.2.200/32", "2001:db8:1::200/128", "192.0.2.102/32"}
	for _, p := range foreign {
		addAddr(t, a, p)
	}
	notOurs := slices.Concat(foreign, []string{a.Prefix4().String(), a.Prefix6().String()}) // with the operator's
	v4a, v4b := netip.MustParseAddr("192.0.2.100"), netip.MustParseAddr("192.0.2.101")
	v6a, v6b := netip.MustParseAddr("2001:db8:1::100"), netip.MustParseAddr("2001:db8:1::101")
	foreignVIP := netip.MustParseAddr("192.0.2.102")
	macA := mac(t, a)
	nsA := openNetns(t, a)

	logger, ctx := ktesting.NewTestContext(t)
	m := NewManager(a.Iface, logger, InNamespace(nsA))
	start := time.Now()

	// b has stale entries pointing elsewhere: the announcements must fix them.
	poisonNeighbours(t, b, v4a, v6a)
	if err := m.Set(ctx, []netip.Addr{v4a, v4b, v6a, v6b, foreignVIP}); err != nil {
		t.Fatalf("Set: %v", err)
	}
	expectAddrs(t, a, []string{"192.0.2.100/32", "192.0.2.101/32", "2001:db8:1::100/128", "2001:db8:1::101/128"}, nil)
	expectAddrs(t, a, foreign, nil)
	expectMarks(t, nsA, v4a, v4b, v6a, v6b)
	waitNeighbour(t, b, v4a, macA)
	waitNeighbour(t, b, v6a, macA)
	t.Logf("added and announced in %s", time.Since(start))

	serve(t, a, ":8080")
	for _, vip := range []netip.Addr{v4a, v4b, v6a, v6b, foreignVIP} {
		dial(t, b, netip.AddrPortFrom(vip, 8080))
	}

	// Announce repeats it: the kernel never announces by itself. Wait out
	// Set's own burst (3 frames 100 ms apart) first, and check that the
	// poisoned entries stay wrong without Announce, so that it is Announce
	// that repairs them.
	time.Sleep(500 * time.Millisecond)
	poisonNeighbours(t, b, v4a, v6a)
	time.Sleep(300 * time.Millisecond)
	for _, vip := range []netip.Addr{v4a, v6a} {
		if mac, _, _ := neighbour(t, b, vip); mac.String() == macA.String() {
			t.Fatalf("neighbour entry of %s repaired without an announcement", vip)
		}
	}
	m.Announce(ctx)
	waitNeighbour(t, b, v4a, macA)
	waitNeighbour(t, b, v6a, macA)

	// Addresses being handed over (Quiet) stay on the interface, and
	// Announce leaves them out: b's poisoned entries stay wrong, the
	// others' are repaired. Once no longer quiet, Announce repairs them.
	m.Quiet([]netip.Addr{v4a, v6a})
	poisonNeighbours(t, b, v4a, v6a, v4b, v6b)
	m.Announce(ctx)
	waitNeighbour(t, b, v4b, macA)
	waitNeighbour(t, b, v6b, macA)
	time.Sleep(300 * time.Millisecond) // the rest of Announce's burst
	for _, vip := range []netip.Addr{v4a, v6a} {
		if mac, _, _ := neighbour(t, b, vip); mac.String() == macA.String() {
			t.Errorf("neighbour entry of %s repaired while it was quiet", vip)
		}
	}
	expectAddrs(t, a, []string{"192.0.2.100/32", "2001:db8:1::100/128"}, nil)
	m.Quiet(nil)
	m.Announce(ctx)
	waitNeighbour(t, b, v4a, macA)
	waitNeighbour(t, b, v6a, macA)

	if err := m.Set(ctx, []netip.Addr{v4a, v6a}); err != nil {
		t.Fatalf("Set with fewer: %v", err)
	}
	expectAddrs(t, a, []string{"192.0.2.100/32", "2001:db8:1::100/128"}, []string{"192.0.2.101/32", "2001:db8:1::101/128"})
	expectAddrs(t, a, foreign, nil)

	// A restarted agent adopts its predecessor's addresses by their mark:
	// it finds them (and none of the others), and its Set keeps them.
	m2 := NewManager(a.Iface, logger, InNamespace(nsA))
	present, err := m2.Present(ctx)
	if err != nil {
		t.Fatalf("Present after restart: %v", err)
	}
	if want := []netip.Addr{v4a, v6a}; !slices.Equal(present, want) {
		t.Errorf("Present after restart = %v, want the predecessor's %v", present, want)
	}
	if err := m2.Set(ctx, []netip.Addr{v4a}); err != nil {
		t.Fatalf("Set after restart: %v", err)
	}
	expectAddrs(t, a, []string{"192.0.2.100/32"}, []string{"2001:db8:1::100/128"})

	if err := m2.Cleanup(ctx); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	expectAddrs(t, a, notOurs, []string{"192.0.2.100/32"})
	if err := m.Cleanup(ctx); err != nil {
		t.Fatalf("second Cleanup: %v", err)
	}
	expectAddrs(t, a, notOurs, nil)
	t.Logf("whole test in %s", time.Since(start))
}

func TestSetMissingInterface(t *testing.T) {
	a, _ := newKernelLab(t)
	logger, ctx := ktesting.NewTestContext(t)
	m := NewManager("nosuch0", logger, InNamespace(openNetns(t, a)))
	if err := m.Set(ctx, []netip.Addr{netip.MustParseAddr("192.0.2.100")}); !errors.Is(err, errNoLink) {
		t.Errorf("Set on a missing interface = %v, want errNoLink", err)
	}
	if err := m.Cleanup(ctx); err != nil {
		t.Errorf("Cleanup on a missing interface = %v, want nil", err)
	}
	if got, err := m.Present(ctx); err != nil || got != nil {
		t.Errorf("Present on a missing interface = %v, %v; want none, nil", got, err)
	}
}

// openNetns opens h's namespace for the code under test, which takes a
// handle; it is closed when the test ends.
func openNetns(t *testing.T, h *netlab.Host) netns.NsHandle {
	t.Helper()
	ns, err := netns.GetFromName(h.Netns)
	if err != nil {
		t.Fatalf("open namespace of %s: %v", h.Name, err)
	}
	t.Cleanup(func() { ns.Close() })
	return ns
}

// addAddr adds an address to h's link the way an operator would.
func addAddr(t *testing.T, h *netlab.Host, prefix string) {
	t.Helper()
	args := []string{"addr", "add", prefix, "dev", h.Iface}
	if netip.MustParsePrefix(prefix).Addr().Is6() {
		args = append(args, "nodad")
	}
	runIn(t, h, "ip", args...)
}

// linkAddrs lists the addresses of h's link through the ip command,
// independently of the package's own netlink code.
func linkAddrs(t *testing.T, h *netlab.Host) map[netip.Prefix]bool {
	t.Helper()
	out := runIn(t, h, "ip", "-j", "addr", "show", "dev", h.Iface)
	var links []struct {
		AddrInfo []struct {
			Local     string `json:"local"`
			PrefixLen int    `json:"prefixlen"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal([]byte(out), &links); err != nil {
		t.Fatalf("parse ip addr show: %v", err)
	}
	res := map[netip.Prefix]bool{}
	for _, li := range links {
		for _, a := range li.AddrInfo {
			res[netip.PrefixFrom(netip.MustParseAddr(a.Local), a.PrefixLen)] = true
		}
	}
	return res
}

// runIn runs a command in h's namespace and returns its standard output.
func runIn(t *testing.T, h *netlab.Host, name string, args ...string) string {
	t.Helper()
	var stderr bytes.Buffer
	cmd := h.Command(t.Context(), name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s in %s: %v: %s", name, strings.Join(args, " "), h.Name, err, stderr.Bytes())
	}
	return string(out)
}

// netlinkIn opens a netlink handle whose sockets live in h's namespace; the
// caller closes it.
func netlinkIn(t *testing.T, h *netlab.Host) *netlink.Handle {
	t.Helper()
	var nh *netlink.Handle
	if err := h.Do(func() (err error) { nh, err = netlink.NewHandle(); return err }); err != nil {
		t.Fatalf("netlink handle in %s: %v", h.Name, err)
	}
	return nh
}

func mac(t *testing.T, h *netlab.Host) net.HardwareAddr {
	t.Helper()
	nh := netlinkIn(t, h)
	defer nh.Close()
	link, err := nh.LinkByName(h.Iface)
	if err != nil {
		t.Fatalf("%s in %s: %v", h.Iface, h.Name, err)
	}
	return link.Attrs().HardwareAddr
}

// neighbour returns h's neighbour entry for a on its link, if any.
func neighbour(t *testing.T, h *netlab.Host, a netip.Addr) (net.HardwareAddr, int, bool) {
	t.Helper()
	nh := netlinkIn(t, h)
	defer nh.Close()
	link, err := nh.LinkByName(h.Iface)
	if err != nil {
		t.Fatalf("%s in %s: %v", h.Iface, h.Name, err)
	}
	family := unix.AF_INET6
	if a.Is4() {
		family = unix.AF_INET
	}
	neighs, err := nh.NeighList(link.Attrs().Index, family)
	if err != nil {
		t.Fatalf("neighbours of %s: %v", h.Name, err)
	}
	for _, n := range neighs {
		if na, ok := netip.AddrFromSlice(n.IP); ok && na.Unmap() == a {
			return n.HardwareAddr, n.State, true
		}
	}
	return nil, 0, false
}

func poisonNeighbours(t *testing.T, h *netlab.Host, addrs ...netip.Addr) {
	t.Helper()
	for _, a := range addrs {
		runIn(t, h, "ip", "neigh", "replace", a.String(), "lladdr", wrongMAC.String(), "dev", h.Iface, "nud", "stale")
		if mac, _, ok := neighbour(t, h, a); !ok || !bytes.Equal(mac, wrongMAC) {
			t.Fatalf("%s's entry for %s = %s, want the planted %s", h.Name, a, mac, wrongMAC)
		}
	}
}

func waitNeighbour(t *testing.T, h *netlab.Host, a netip.Addr, want net.HardwareAddr) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		mac, state, ok := neighbour(t, h, a)
		if ok && bytes.Equal(mac, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's neighbour entry for %s = %s (state %#x, present %v), want %s", h.Name, a, mac, state, ok, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// expectAddrs checks that h's link has every prefix of present and none of
// absent.
func expectAddrs(t *testing.T, h *netlab.Host, present, absent []string) {
	t.Helper()
	got := linkAddrs(t, h)
	for _, p := range present {
		if !got[netip.MustParsePrefix(p)] {
			t.Errorf("%s lacks %s; has %v", h.Name, p, got)
		}
	}
	for _, p := range absent {
		if got[netip.MustParsePrefix(p)] {
			t.Errorf("%s still has %s", h.Name, p)
		}
	}
}

// expectMarks checks, through the package's own listing of eth0 in ns, that
// the addresses carry the mark and that IPv6 ones skipped DAD and are
// deprecated.
func expectMarks(t *testing.T, ns netns.NsHandle, addrs ...netip.Addr) {
	t.Helper()
	r, err := dialRTNL(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	link, err := r.link("eth0")
	if err != nil {
		t.Fatal(err)
	}
	observed, err := r.addrs(link.index)
	if err != nil {
		t.Fatal(err)
	}
	byAddr := map[netip.Addr]kernelAddr{}
	for _, o := range observed {
		byAddr[o.Prefix.Addr()] = o
	}
	for _, a := range addrs {
		o := byAddr[a]
		if o.Proto != AddrProtocol {
			t.Errorf("%s has protocol %#x, want %#x", a, o.Proto, AddrProtocol)
		}
		const want6 = 0x02 | 0x20 // IFA_F_NODAD | IFA_F_DEPRECATED
		if a.Is6() && o.Flags&want6 != want6 {
			t.Errorf("%s has flags %#x, want nodad and deprecated (%#x)", a, o.Flags, want6)
		}
	}
	if o := byAddr[netip.MustParseAddr("192.0.2.200")]; o.Proto == AddrProtocol {
		t.Errorf("foreign address carries our mark")
	}
}

// serve accepts TCP connections in h and writes the local address each one
// reached.
func serve(t *testing.T, h *netlab.Host, addr string) {
	t.Helper()
	var ln net.Listener
	if err := h.Do(func() (err error) { ln, err = net.Listen("tcp", addr); return err }); err != nil {
		t.Fatalf("listen in %s: %v", h.Name, err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, c.LocalAddr().String())
			c.Close()
		}
	}()
}

// dial connects from h to to and checks that the server saw to as its local
// address.
func dial(t *testing.T, h *netlab.Host, to netip.AddrPort) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	c, err := h.DialTCP(ctx, to)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", to, h.Name, err)
	}
	if want := to.String(); !strings.HasSuffix(string(got), want) {
		t.Errorf("dial %s reached %q", to, got)
	}
}

package vip

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"
)

var wrongMAC = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x00, 0x99}

// TestManagerKernel runs a Manager on eth0 of namespace a, with b as a
// client on the same link.
func TestManagerKernel(t *testing.T) {
	l := newLab(t)
	l.addr("a", "192.0.2.1/24")
	l.addr("a", "2001:db8:1::1/64")
	l.addr("b", "192.0.2.2/24")
	l.addr("b", "2001:db8:1::2/64")
	// Someone else's addresses on the same interface; one of them is also
	// wanted as a virtual IP.
	foreign := []string{"192.0.2.200/32", "2001:db8:1::200/128", "192.0.2.102/32"}
	for _, p := range foreign {
		l.addr("a", p)
	}
	v4a, v4b := netip.MustParseAddr("192.0.2.100"), netip.MustParseAddr("192.0.2.101")
	v6a, v6b := netip.MustParseAddr("2001:db8:1::100"), netip.MustParseAddr("2001:db8:1::101")
	foreignVIP := netip.MustParseAddr("192.0.2.102")
	macA := l.mac("a")

	logger, ctx := ktesting.NewTestContext(t)
	m := New("eth0", logger, InNamespace(l.ns["a"]))
	start := time.Now()

	// b has stale entries pointing elsewhere: the announcements must fix them.
	l.poisonNeighbours("b", v4a, v6a)
	if err := m.Set(ctx, []netip.Addr{v4a, v4b, v6a, v6b, foreignVIP}); err != nil {
		t.Fatalf("Set: %v", err)
	}
	l.expectAddrs("a", []string{"192.0.2.100/32", "192.0.2.101/32", "2001:db8:1::100/128", "2001:db8:1::101/128"}, nil)
	l.expectAddrs("a", foreign, nil)
	l.expectMarks(v4a, v4b, v6a, v6b)
	l.waitNeighbour("b", v4a, macA)
	l.waitNeighbour("b", v6a, macA)
	t.Logf("added and announced in %s", time.Since(start))

	l.serve("a", ":8080")
	for _, vip := range []netip.Addr{v4a, v4b, v6a, v6b, foreignVIP} {
		l.dial("b", netip.AddrPortFrom(vip, 8080))
	}

	// Announce repeats it: the kernel never announces by itself.
	l.poisonNeighbours("b", v4a, v6a)
	m.Announce(ctx)
	l.waitNeighbour("b", v4a, macA)
	l.waitNeighbour("b", v6a, macA)

	if err := m.Set(ctx, []netip.Addr{v4a, v6a}); err != nil {
		t.Fatalf("Set with fewer: %v", err)
	}
	l.expectAddrs("a", []string{"192.0.2.100/32", "2001:db8:1::100/128"}, []string{"192.0.2.101/32", "2001:db8:1::101/128"})
	l.expectAddrs("a", foreign, nil)

	// A restarted agent adopts its predecessor's addresses by their mark.
	m2 := New("eth0", logger, InNamespace(l.ns["a"]))
	if err := m2.Set(ctx, []netip.Addr{v4a}); err != nil {
		t.Fatalf("Set after restart: %v", err)
	}
	l.expectAddrs("a", []string{"192.0.2.100/32"}, []string{"2001:db8:1::100/128"})

	if err := m2.Cleanup(ctx); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	l.expectAddrs("a", append(foreign, "192.0.2.1/24", "2001:db8:1::1/64"), []string{"192.0.2.100/32"})
	if err := m.Cleanup(ctx); err != nil {
		t.Fatalf("second Cleanup: %v", err)
	}
	l.expectAddrs("a", append(foreign, "192.0.2.1/24", "2001:db8:1::1/64"), nil)
	t.Logf("whole test in %s", time.Since(start))
}

func TestSetMissingInterface(t *testing.T) {
	l := newLab(t)
	logger, ctx := ktesting.NewTestContext(t)
	m := New("nosuch0", logger, InNamespace(l.ns["a"]))
	if err := m.Set(ctx, []netip.Addr{netip.MustParseAddr("192.0.2.100")}); !errors.Is(err, errNoLink) {
		t.Errorf("Set on a missing interface = %v, want errNoLink", err)
	}
	if err := m.Cleanup(ctx); err != nil {
		t.Errorf("Cleanup on a missing interface = %v, want nil", err)
	}
}

func (l *lab) poisonNeighbours(host string, addrs ...netip.Addr) {
	l.t.Helper()
	for _, a := range addrs {
		l.ip("-n", l.name(host), "neigh", "replace", a.String(), "lladdr", wrongMAC.String(), "dev", "eth0", "nud", "stale")
		if mac, _, ok := l.neighbour(host, a); !ok || !bytes.Equal(mac, wrongMAC) {
			l.t.Fatalf("%s's entry for %s = %s, want the planted %s", host, a, mac, wrongMAC)
		}
	}
}

func (l *lab) waitNeighbour(host string, a netip.Addr, want net.HardwareAddr) {
	l.t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		mac, state, ok := l.neighbour(host, a)
		if ok && bytes.Equal(mac, want) {
			return
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("%s's neighbour entry for %s = %s (state %#x, present %v), want %s", host, a, mac, state, ok, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// expectAddrs checks that host's eth0 has every prefix of present and none
// of absent.
func (l *lab) expectAddrs(host string, present, absent []string) {
	l.t.Helper()
	got := l.addrs(host)
	for _, p := range present {
		if !got[netip.MustParsePrefix(p)] {
			l.t.Errorf("%s lacks %s; has %v", host, p, got)
		}
	}
	for _, p := range absent {
		if got[netip.MustParsePrefix(p)] {
			l.t.Errorf("%s still has %s", host, p)
		}
	}
}

// expectMarks checks, through the package's own listing, that the addresses
// carry the mark and that IPv6 ones skipped DAD and are deprecated.
func (l *lab) expectMarks(addrs ...netip.Addr) {
	l.t.Helper()
	r, err := dialRTNL(l.ns["a"])
	if err != nil {
		l.t.Fatal(err)
	}
	defer r.close()
	link, err := r.link("eth0")
	if err != nil {
		l.t.Fatal(err)
	}
	observed, err := r.addrs(link.index)
	if err != nil {
		l.t.Fatal(err)
	}
	byAddr := map[netip.Addr]kernelAddr{}
	for _, o := range observed {
		byAddr[o.Prefix.Addr()] = o
	}
	for _, a := range addrs {
		o := byAddr[a]
		if o.Proto != AddrProtocol {
			l.t.Errorf("%s has protocol %#x, want %#x", a, o.Proto, AddrProtocol)
		}
		const want6 = 0x02 | 0x20 // IFA_F_NODAD | IFA_F_DEPRECATED
		if a.Is6() && o.Flags&want6 != want6 {
			l.t.Errorf("%s has flags %#x, want nodad and deprecated (%#x)", a, o.Flags, want6)
		}
	}
	if o := byAddr[netip.MustParseAddr("192.0.2.200")]; o.Proto == AddrProtocol {
		l.t.Errorf("foreign address carries our mark")
	}
}

// serve accepts TCP connections in host and writes the local address each
// one reached.
func (l *lab) serve(host, addr string) {
	l.t.Helper()
	var ln net.Listener
	if err := l.do(host, func() (err error) { ln, err = net.Listen("tcp", addr); return err }); err != nil {
		l.t.Fatalf("listen in %s: %v", host, err)
	}
	l.t.Cleanup(func() { ln.Close() })
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

// dial connects from host to to and checks that the server saw to as its
// local address.
func (l *lab) dial(host string, to netip.AddrPort) {
	l.t.Helper()
	var got []byte
	err := l.do(host, func() error {
		c, err := net.DialTimeout("tcp", to.String(), 3*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(3 * time.Second))
		got, err = io.ReadAll(c)
		return err
	})
	if err != nil {
		l.t.Fatalf("dial %s from %s: %v", to, host, err)
	}
	if want := to.String(); !strings.HasSuffix(string(got), want) {
		l.t.Errorf("dial %s reached %q", to, got)
	}
}

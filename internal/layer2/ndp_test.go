package layer2

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

// ndpMessage is a Neighbor Solicitation or Advertisement for target with
// mac in the option its type carries (none when nil).
func ndpMessage(op uint8, target netip.Addr, mac net.HardwareAddr, flags byte) []byte {
	t := target.As16()
	b := []byte{op, 0, 0, 0, flags, 0, 0, 0}
	b = append(b, t[:]...)
	if mac != nil {
		opt := byte(ndpOptSourceLL)
		if op == ndpAdvertisement {
			opt = ndpOptTargetLL
		}
		b = append(b, opt, 1)
		b = append(b, mac...)
	}
	return b
}

func TestNDPMessages(t *testing.T) {
	self, _ := net.ParseMAC("02:00:00:00:00:01")
	other, _ := net.ParseMAC("02:00:00:00:00:02")
	v := netip.MustParseAddr("2001:db8:0:1::c8")

	t.Run("DAD probe", func(t *testing.T) {
		f := dadProbe(other, v)
		if len(f) != 14+40+nsLen {
			t.Fatalf("probe is %d bytes", len(f))
		}
		want := net.HardwareAddr{0x33, 0x33, 0xff, 0, 0, 0xc8}
		if got := net.HardwareAddr(f[:6]); got.String() != want.String() || net.HardwareAddr(f[6:12]).String() != other.String() {
			t.Errorf("Ethernet addresses %s -> %s", net.HardwareAddr(f[6:12]), got)
		}
		src, dst := netip.AddrFrom16([16]byte(f[22:38])), netip.AddrFrom16([16]byte(f[38:54]))
		if f[12] != 0x86 || f[13] != 0xdd || f[20] != 58 || f[21] != 255 || !src.IsUnspecified() || dst != netip.MustParseAddr("ff02::1:ff00:c8") {
			t.Errorf("IPv6 header: % x", f[12:54])
		}
		if sum := icmpv6Checksum(src.As16(), dst.As16(), f[54:]); sum != 0 {
			t.Errorf("checksum does not verify: %#x", sum)
		}
		p, ok := parseNDP(src, f[54:])
		if !ok || p.op != ndpSolicitation || p.target != v || p.mac != nil {
			t.Fatalf("parse probe: %+v %v", p, ok)
		}
	})

	client := netip.MustParseAddr("2001:db8:0:1::50")
	node := netip.MustParseAddr("2001:db8:0:1::11")
	unspec := netip.IPv6Unspecified()
	tests := []struct {
		name string
		src  netip.Addr
		msg  []byte
		want Claim // the zero Claim: none
	}{
		{"another agent's DAD probe: active, no MAC", unspec, ndpMessage(ndpSolicitation, v, nil, 0), Claim{v, "", true}},
		{"a DAD probe with a link-layer option", unspec, ndpMessage(ndpSolicitation, v, other, 0), Claim{v, other.String(), true}},
		{"another kernel's answer to a probe (or an agent's announcement)", v, ndpMessage(ndpAdvertisement, v, other, 0x20), Claim{v, other.String(), false}},
		{"a solicited advertisement from another kernel", v, ndpMessage(ndpAdvertisement, v, other, 0x60), Claim{v, other.String(), false}},
		{"another kernel asking from the address", v, ndpMessage(ndpSolicitation, node, other, 0), Claim{v, other.String(), false}},
		{"a client asking for it claims its own address", client, ndpMessage(ndpSolicitation, v, other, 0), Claim{client, other.String(), false}},
		{"our own advertisement", v, ndpMessage(ndpAdvertisement, v, self, 0x20), Claim{}},
		{"our own solicitation from the address", v, ndpMessage(ndpSolicitation, node, self, 0), Claim{}},
		{"an advertisement without a MAC", v, ndpMessage(ndpAdvertisement, v, nil, 0x60), Claim{}},
		{"a solicitation from the address without a MAC", v, ndpMessage(ndpSolicitation, node, nil, 0), Claim{}},
		{"a DAD probe for another address", unspec, ndpMessage(ndpSolicitation, client, nil, 0), Claim{client, "", true}},
		{"an advertisement for another address", client, ndpMessage(ndpAdvertisement, client, other, 0x20), Claim{client, other.String(), false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, ok := parseNDP(tt.src, tt.msg)
			if !ok {
				t.Fatalf("parse: %+v", p)
			}
			got, ok := claimNDP(p, self)
			if ok != (tt.want != Claim{}) || got != tt.want {
				t.Errorf("claimNDP = %+v %v, want %+v", got, ok, tt.want)
			}
		})
	}

	t.Run("options and malformed messages", func(t *testing.T) {
		// A nonce option (type 14, RFC 3971) before the link-layer one.
		msg := append(ndpMessage(ndpAdvertisement, v, nil, 0x20), 14, 1, 1, 2, 3, 4, 5, 6, ndpOptTargetLL, 1)
		msg = append(msg, other...)
		if p, ok := parseNDP(v, msg); !ok || p.mac.String() != other.String() {
			t.Errorf("with two options: %+v %v", p, ok)
		}
		// A source link-layer option in an advertisement is not its MAC.
		msg = append(ndpMessage(ndpAdvertisement, v, nil, 0x20), ndpOptSourceLL, 1)
		msg = append(msg, other...)
		if p, ok := parseNDP(v, msg); !ok || p.mac != nil {
			t.Errorf("advertisement with a source option: %+v %v", p, ok)
		}
		bad := map[string][]byte{
			"short":              ndpMessage(ndpSolicitation, v, nil, 0)[:20],
			"option of length 0": append(ndpMessage(ndpSolicitation, v, nil, 0), 1, 0, 0, 0, 0, 0, 0, 0),
			"option too long":    append(ndpMessage(ndpSolicitation, v, nil, 0), 1, 2, 0, 0, 0, 0, 0, 0),
			"code not 0":         append([]byte{ndpSolicitation, 1}, ndpMessage(ndpSolicitation, v, nil, 0)[2:]...),
			"a router advert":    append([]byte{134}, ndpMessage(ndpSolicitation, v, nil, 0)[1:]...),
		}
		for name, msg := range bad {
			if p, ok := parseNDP(v, msg); ok {
				t.Errorf("%s: parsed %+v", name, p)
			}
		}
	})
}

// TestNDPKernel runs a Guard's IPv6 half between network namespaces:
// host a probes an address b's kernel holds and hears b's answer (passive,
// with b's MAC); a hears c's DAD probe for an address a does not hold but
// follows (active, no MAC), but neither its own probes nor a client asking
// for the address. b has no socket: its kernel alone answers.
func TestNDPKernel(t *testing.T) {
	l := netlab.NewT(t, netlab.Options{})
	a := l.AddHostT(t, "a", netlab.HostOptions{})
	b := l.AddHostT(t, "b", netlab.HostOptions{})
	c := l.AddHostT(t, "c", netlab.HostOptions{})
	v := netip.MustParseAddr("2001:db8:0:1::c8")
	if out, err := b.Command(t.Context(), "ip", "-6", "addr", "add", v.String()+"/128", "dev", b.Iface, "nodad", "preferred_lft", "0").CombinedOutput(); err != nil {
		t.Fatalf("add %s to b: %v\n%s", v, err, out)
	}
	open := func(h *netlab.Host) (*ndpSocket, net.HardwareAddr) {
		var s *ndpSocket
		if err := h.Do(func() error {
			ifi, err := net.InterfaceByName(h.Iface)
			if err == nil {
				s, err = openNDPSocket(h.Iface, ifi.Index)
			}
			return err
		}); err != nil {
			t.Fatalf("open NDP socket in %s: %v", h.Name, err)
		}
		t.Cleanup(func() { _ = s.close() })
		return s, macOf(t, h)
	}
	sa, macA := open(a)
	sc, macC := open(c)
	macB := macOf(t, b)
	if err := sa.follow([]netip.Addr{v}); err != nil {
		t.Fatal(err)
	}
	// claims reads what a sees claimed of v for d.
	claims := func(d time.Duration) []Claim {
		read := (&Guard{self: macA, ndp: sa}).ndpReader()
		var out []Claim
		for end := time.Now().Add(d); time.Now().Before(end); {
			cl, ok, err := read()
			if err != nil {
				t.Fatal(err)
			}
			if ok && cl.Addr == v {
				out = append(out, cl)
			}
		}
		return out
	}
	// expect sends until a sees a claim that is needed; every one must be allowed.
	expect := func(what string, send func() error, allowed, needed func(Claim) bool) {
		t.Helper()
		for range 5 {
			if err := send(); err != nil {
				t.Fatal(err)
			}
			found := false
			for _, cl := range claims(500 * time.Millisecond) {
				t.Logf("%s: a sees %+v", what, cl)
				if !allowed(cl) {
					t.Errorf("%s: unexpected claim %+v", what, cl)
				}
				found = found || needed(cl)
			}
			if found {
				return
			}
		}
		t.Errorf("%s: not seen", what)
	}
	kernelB := func(cl Claim) bool { return cl.Addr == v && !cl.Active && cl.MAC == macB.String() }
	probeC := func(cl Claim) bool { return cl.Addr == v && cl.Active && cl.MAC == "" }
	expect("a probes, b's kernel answers", func() error { return sa.send(dadProbe(macA, v)) }, kernelB, kernelB)
	// b's kernel answers c's probe too.
	expect("c probes", func() error { return sc.send(dadProbe(macC, v)) },
		func(cl Claim) bool { return kernelB(cl) || probeC(cl) }, probeC)

	// A client (c) resolving the address: a hears c's solicitation, which
	// claims c's address, not v.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	go func() { _ = c.Command(ctx, "ping", "-6", "-c", "2", "-i", "0.2", v.String()).Run() }()
	for _, cl := range claims(time.Second) {
		if !kernelB(cl) {
			t.Errorf("a client resolving the address: claim %+v", cl)
		}
	}
}

func macOf(t *testing.T, h *netlab.Host) net.HardwareAddr {
	t.Helper()
	var mac net.HardwareAddr
	if err := h.Do(func() error {
		ifi, err := net.InterfaceByName(h.Iface)
		if err == nil {
			mac = ifi.HardwareAddr
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return mac
}

package dataplane

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/knftables"
)

// The kernel lab: one L2 segment (a bridge namespace) with a client, a
// load-balancer host holding the VIPs and running the real Syncer with the
// real nft, and two nodes answering on their NodePorts.
var (
	labClient     = netip.MustParseAddr("192.0.2.2")
	labClientBad  = netip.MustParseAddr("192.0.2.3") // outside the source ranges
	labClient6    = netip.MustParseAddr("2001:db8::2")
	labClientBad6 = netip.MustParseAddr("2001:db8::3")
	labVIP        = netip.MustParseAddr("192.0.2.100")
	labVIP6       = netip.MustParseAddr("2001:db8::100")
	labNodes      = map[string][]string{"node-a": {"192.0.2.11", "2001:db8::11"}, "node-b": {"192.0.2.12", "2001:db8::12"}}
)

const (
	labTCPNodePort = 30080
	labUDPNodePort = 30053
)

func labState() State {
	backends := func(mods ...func(*Service)) []func(*Service) {
		return append(mods, withBackend("node-a", true, labNodes["node-a"]...), withBackend("node-b", true, labNodes["node-b"]...))
	}
	return State{Services: []Service{
		newService("lab/web", backends(withVIPs(labVIP.String(), labVIP6.String()),
			withPort(TCP, 80, labTCPNodePort), withPort(UDP, 53, labUDPNodePort),
			withSourceRanges("192.0.2.2/32", "2001:db8::2/128"))...),
		newService("lab/sticky", backends(withVIPs(labVIP.String(), labVIP6.String()),
			withPort(TCP, 83, labTCPNodePort), withAffinity())...),
		newService("lab/down", withVIPs(labVIP.String(), labVIP6.String()),
			withPort(TCP, 81, labTCPNodePort), withPort(UDP, 82, labUDPNodePort),
			withBackend("node-a", false, labNodes["node-a"]...)),
	}}
}

func TestKernelDataPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("kernel test: creates network namespaces and runs nft")
	}
	if os.Geteuid() != 0 {
		t.Skip("kernel test: needs root")
	}
	for _, bin := range []string{"nft", "ip"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("kernel test: no %s binary", bin)
		}
	}
	l := newLab(t, "client", "lb", "node-a", "node-b")
	l.addr("client", "192.0.2.2/24")
	l.addr("client", "192.0.2.3/24")
	l.addr("client", "2001:db8::2/64")
	l.addr("client", "2001:db8::3/64")
	l.addr("lb", "192.0.2.1/24")
	l.addr("lb", "2001:db8::1/64")
	l.addr("lb", "192.0.2.100/32") // the VIPs, as the agent adds them
	l.addr("lb", "2001:db8::100/128")
	for node, ips := range labNodes {
		l.addr(node, ips[0]+"/24")
		l.addr(node, ips[1]+"/64")
		l.serve(node, labTCPNodePort, labUDPNodePort)
	}
	l.sysctl("lb", "net/ipv4/ip_forward", "1")
	l.sysctl("lb", "net/ipv6/conf/all/forwarding", "1")
	l.sysctl("lb", "net/ipv4/conf/all/send_redirects", "0")
	l.sysctl("lb", "net/ipv4/conf/eth0/send_redirects", "0")

	var syncer *Syncer
	if err := l.do("lb", func() error {
		nft4, err := NewNFTables(knftables.IPv4Family)
		if err != nil {
			return err
		}
		nft6, err := NewNFTables(knftables.IPv6Family)
		if err != nil {
			return err
		}
		syncer = NewSyncer(nft4, nft6, NetlinkConntrack{})
		return nil
	}); err != nil {
		t.Fatalf("nftables in the lb namespace: %v", err)
	}
	sync := func(st State) {
		t.Helper()
		if err := l.do("lb", func() error { return syncer.Sync(context.Background(), st) }); err != nil {
			t.Fatalf("Sync in the lb namespace: %v", err)
		}
	}
	state := labState()
	sync(state)
	l.sysctl("lb", "net/netfilter/nf_conntrack_tcp_loose", "1")
	if err := l.do("lb", func() error { return CheckHost() }); err != nil {
		t.Errorf("CheckHost in the prepared lb namespace: %v", err)
	}
	if err := l.do("client", func() error { return CheckHost() }); err == nil {
		t.Errorf("CheckHost finds nothing wrong in the client namespace, which does not forward")
	}
	t.Logf("ruleset in the lb namespace:\n%s", l.nft(t, "list", "ruleset"))

	// The tracer predicts the node of each flow from the Fake's ruleset; the
	// kernel must agree, which checks the jhash bucket choice end to end.
	tr, _ := syncedTracer(t, state)
	predict := func(src netip.AddrPort, dst netip.AddrPort) string {
		v := tr.run(tcp(src.Addr().String(), src.Port(), dst.Addr().String(), dst.Port()))
		for node, ips := range labNodes {
			for _, ip := range ips {
				if v.dnat.Addr().String() == ip {
					return node
				}
			}
		}
		return v.String()
	}

	t.Run("TCP reaches both nodes through both VIPs, SNATed to the VIP", func(t *testing.T) {
		for _, c := range []struct{ src, vip netip.Addr }{{labClient, labVIP}, {labClient6, labVIP6}} {
			seen := map[string]int{}
			for sport := uint16(41000); sport < 41024; sport++ {
				src, dst := netip.AddrPortFrom(c.src, sport), netip.AddrPortFrom(c.vip, 80)
				r, err := l.dialTCP("client", src, dst, 3*time.Second)
				if err != nil {
					t.Fatalf("%s -> %s: %v", src, dst, err)
				}
				if r.peer != c.vip {
					t.Errorf("%s saw the client as %s, want the VIP %s", r.node, r.peer, c.vip)
				}
				if want := predict(src, dst); r.node != want {
					t.Errorf("%s -> %s reached %s, the tracer predicts %s", src, dst, r.node, want)
				}
				seen[r.node]++
			}
			if len(seen) != 2 {
				t.Errorf("%s: connections did not spread over both nodes: %v", c.vip, seen)
			}
		}
	})

	t.Run("UDP reaches both nodes through both VIPs, SNATed to the VIP", func(t *testing.T) {
		for _, c := range []struct{ src, vip netip.Addr }{{labClient, labVIP}, {labClient6, labVIP6}} {
			seen := map[string]int{}
			for sport := uint16(41100); sport < 41116; sport++ {
				u := l.udpClient("client", netip.AddrPortFrom(c.src, sport), netip.AddrPortFrom(c.vip, 53))
				r, err := u.ask(time.Second)
				if err != nil {
					t.Fatalf("UDP from port %d to %s: %v", sport, c.vip, err)
				}
				if r.peer != c.vip {
					t.Errorf("%s saw the client as %s, want the VIP %s", r.node, r.peer, c.vip)
				}
				seen[r.node]++
			}
			if len(seen) != 2 {
				t.Errorf("%s: UDP flows did not spread over both nodes: %v", c.vip, seen)
			}
		}
	})

	t.Run("ClientIP affinity keeps a client on one node", func(t *testing.T) {
		first := ""
		for sport := uint16(41200); sport < 41210; sport++ {
			r, err := l.dialTCP("client", netip.AddrPortFrom(labClient, sport), netip.AddrPortFrom(labVIP, 83), 3*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if first == "" {
				first = r.node
			}
			if r.node != first {
				t.Errorf("port %d reached %s, port 41200 reached %s", sport, r.node, first)
			}
		}
	})

	t.Run("a source outside the ranges is dropped", func(t *testing.T) {
		for _, c := range []struct{ src, vip netip.Addr }{{labClientBad, labVIP}, {labClientBad6, labVIP6}} {
			_, err := l.dialTCP("client", netip.AddrPortFrom(c.src, 0), netip.AddrPortFrom(c.vip, 80), time.Second)
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				t.Errorf("%s -> %s: got %v, want a timeout (dropped)", c.src, c.vip, err)
			}
		}
	})

	t.Run("no healthy backend: TCP reset and ICMP port unreachable", func(t *testing.T) {
		for _, vip := range []netip.Addr{labVIP, labVIP6} {
			src := labClient
			if vip.Is6() {
				src = labClient6
			}
			start := time.Now()
			_, err := l.dialTCP("client", netip.AddrPortFrom(src, 0), netip.AddrPortFrom(vip, 81), 3*time.Second)
			if !errors.Is(err, syscall.ECONNREFUSED) || time.Since(start) > time.Second {
				t.Errorf("TCP to %s:81: got %v after %v, want connection refused at once", vip, err, time.Since(start))
			}
			u := l.udpClient("client", netip.AddrPortFrom(src, 0), netip.AddrPortFrom(vip, 82))
			if _, err := u.ask(time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("UDP to %s:82: got %v, want connection refused (port unreachable)", vip, err)
			}
		}
	})

	t.Run("an unhealthy backend gets no new flows, and its UDP flows move", func(t *testing.T) {
		// Find a UDP flow on node-b and one on node-a before node-b fails.
		var onA, onB *udpClient
		for sport := uint16(41300); sport < 41340 && (onA == nil || onB == nil); sport++ {
			u := l.udpClient("client", netip.AddrPortFrom(labClient, sport), netip.AddrPortFrom(labVIP, 53))
			r, err := u.ask(time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if r.node == "node-a" && onA == nil {
				onA = u
			} else if r.node == "node-b" && onB == nil {
				onB = u
			}
		}
		if onA == nil || onB == nil {
			t.Fatal("no UDP flow found on each node")
		}

		state = withHealth(state, "node-b", false)
		sync(state)
		tr, _ = syncedTracer(t, state)
		for _, vip := range []netip.Addr{labVIP, labVIP6} {
			src := labClient
			if vip.Is6() {
				src = labClient6
			}
			for sport := uint16(42000); sport < 42016; sport++ {
				r, err := l.dialTCP("client", netip.AddrPortFrom(src, sport), netip.AddrPortFrom(vip, 80), 3*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				if r.node != "node-a" {
					t.Errorf("new connection to %s reached unhealthy %s", vip, r.node)
				}
			}
		}
		for name, u := range map[string]*udpClient{"node-a": onA, "node-b": onB} {
			r, err := u.ask(time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if r.node != "node-a" {
				t.Errorf("UDP flow that was on %s now reaches %s; its conntrack entry was not deleted", name, r.node)
			}
		}
	})

	t.Run("removing a service and a full resync work on the real nft", func(t *testing.T) {
		state.Services = state.Services[:2] // lab/down goes
		sync(state)
		if out := l.nft(t, "list", "ruleset"); strings.Contains(out, "lab/down") {
			t.Errorf("chains of a removed service remain:\n%s", out)
		}
		before := l.nft(t, "list", "ruleset")
		syncer.ForceFullSync()
		sync(state)
		if after := l.nft(t, "list", "ruleset"); after != before {
			t.Errorf("a full resync changed the ruleset:\nbefore:\n%s\nafter:\n%s", before, after)
		}
		if _, err := l.dialTCP("client", netip.AddrPortFrom(labClient, 43000), netip.AddrPortFrom(labVIP, 80), 3*time.Second); err != nil {
			t.Errorf("forwarding after the full resync: %v", err)
		}
	})

	t.Run("Cleanup removes our tables", func(t *testing.T) {
		if err := l.do("lb", func() error { return syncer.Cleanup(context.Background()) }); err != nil {
			t.Fatal(err)
		}
		if out := l.nft(t, "list", "tables"); strings.TrimSpace(out) != "" {
			t.Errorf("tables left after Cleanup:\n%s", out)
		}
	})
}

// nft runs the nft binary in the lb namespace.
func (l *lab) nft(t *testing.T, args ...string) string {
	t.Helper()
	var out []byte
	err := l.do("lb", func() error {
		var err error
		out, err = exec.Command("nft", args...).CombinedOutput()
		return err
	})
	if err != nil {
		t.Fatalf("nft %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

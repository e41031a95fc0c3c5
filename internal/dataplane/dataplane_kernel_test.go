package dataplane

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"maps"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"sigs.k8s.io/knftables"

	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

// The kernel lab: one L2 segment (test/framework/netlab's bridge) with a client, a
// load-balancer host holding the VIPs and running the real Syncer with the
// real nft, and two nodes answering on their NodePorts.
var (
	labSubnet6    = netip.MustParsePrefix("2001:db8::/64")
	labClient     = netip.MustParseAddr("192.0.2.2")
	labClientBad  = netip.MustParseAddr("192.0.2.3") // outside the source ranges
	labClient6    = netip.MustParseAddr("2001:db8::2")
	labClientBad6 = netip.MustParseAddr("2001:db8::3")
	labLB         = netip.MustParseAddr("192.0.2.10")
	labLB6        = netip.MustParseAddr("2001:db8::10")
	labVIP        = netip.MustParseAddr("192.0.2.100")
	labVIP6       = netip.MustParseAddr("2001:db8::100")
	labNodes      = map[string][]string{"node-a": {"192.0.2.11", "2001:db8::11"}, "node-b": {"192.0.2.12", "2001:db8::12"}}
)

const (
	labTCPNodePort  = 30080
	labUDPNodePort  = 30053
	labHoldNodePort = 30088
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
		// Two services of one bucket group: one map of addresses, each
		// rule with its own seed and NodePort.
		newService("lab/group-a", backends(withVIPs(labVIP.String(), labVIP6.String()),
			withPort(TCP, 86, labTCPNodePort), withBucketGroup("http:10256/healthz"))...),
		newService("lab/group-b", backends(withVIPs(labVIP.String(), labVIP6.String()),
			withPort(TCP, 87, labTCPNodePort), withBucketGroup("http:10256/healthz"))...),
	}}
}

func withBucketGroup(g string) func(*Service) { return func(s *Service) { s.BucketGroup = g } }

func TestKernelDataPlane(t *testing.T) {
	for _, bin := range []string{"nft", "ip"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("kernel test: no %s binary", bin)
		}
	}
	l := netlab.NewT(t, netlab.Options{Subnet6: labSubnet6}) // skips with -short or without root
	client := l.AddHostT(t, "client", netlab.HostOptions{Addr4: labClient, Addr6: labClient6})
	addAddr(t, client, netip.PrefixFrom(labClientBad, 24))
	addAddr(t, client, netip.PrefixFrom(labClientBad6, 64))
	lb := l.AddHostT(t, "lb", netlab.HostOptions{Addr4: labLB, Addr6: labLB6, Forwarding: true, Sysctls: map[string]string{
		"net.ipv4.conf.all.send_redirects":  "0",
		"net.ipv4.conf.eth0.send_redirects": "0",
	}})
	addAddr(t, lb, netip.PrefixFrom(labVIP, 32)) // the VIPs, as the agent adds them
	addAddr(t, lb, netip.PrefixFrom(labVIP6, 128))
	nodes := map[string]*netlab.Host{}
	for _, node := range slices.Sorted(maps.Keys(labNodes)) {
		ips := labNodes[node]
		h := l.AddHostT(t, node, netlab.HostOptions{Addr4: netip.MustParseAddr(ips[0]), Addr6: netip.MustParseAddr(ips[1])})
		serve(t, h, labTCPNodePort, labUDPNodePort)
		nodes[node] = h
	}

	var syncer *Syncer
	if err := lb.Do(func() error {
		nft4, err := NewNFTables(knftables.IPv4Family)
		if err != nil {
			return err
		}
		nft6, err := NewNFTables(knftables.IPv6Family)
		if err != nil {
			return err
		}
		syncer = NewSyncer(nft4, nft6, nil, NetlinkConntrack{}).BatchBucketElements()
		return nil
	}); err != nil {
		t.Fatalf("nftables in the lb namespace: %v", err)
	}
	sync := func(st State) {
		t.Helper()
		if err := lb.Do(func() error {
			res, err := syncer.Sync(context.Background(), st)
			return errors.Join(err, res.CleanupErr)
		}); err != nil {
			t.Fatalf("Sync in the lb namespace: %v", err)
		}
	}
	state := labState()
	sync(state)
	if err := lb.SetSysctl("net/netfilter/nf_conntrack_tcp_loose", "1"); err != nil {
		t.Fatal(err)
	}
	if err := lb.Do(func() error { return CheckHost() }); err != nil {
		t.Errorf("CheckHost in the prepared lb namespace: %v", err)
	}
	if err := client.Do(func() error { return CheckHost() }); err == nil {
		t.Errorf("CheckHost finds nothing wrong in the client namespace, which does not forward")
	}
	t.Logf("ruleset in the lb namespace:\n%s", nft(t, lb, "list", "ruleset"))

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
				r, err := dialTCP(client, src, dst, 3*time.Second)
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

	t.Run("a bucket group's services share one map and reach the nodes the tracer predicts", func(t *testing.T) {
		ruleset := nft(t, lb, "list", "table", "ip", TableName)
		if n := strings.Count(ruleset, "\tmap grp-"); n != 1 {
			t.Errorf("%d group maps in the ip table, want 1:\n%s", n, ruleset)
		}
		for _, c := range []struct{ src, vip netip.Addr }{{labClient, labVIP}, {labClient6, labVIP6}} {
			for i, port := range []uint16{86, 87} {
				seen := map[string]int{}
				from := 45000 + 100*uint16(i) // a port of its own: the last one's is in TIME_WAIT
				for sport := from; sport < from+16; sport++ {
					src, dst := netip.AddrPortFrom(c.src, sport), netip.AddrPortFrom(c.vip, port)
					r, err := dialTCP(client, src, dst, 3*time.Second)
					if err != nil {
						t.Fatalf("%s -> %s: %v", src, dst, err)
					}
					if want := predict(src, dst); r.node != want {
						t.Errorf("%s -> %s reached %s, the tracer predicts %s", src, dst, r.node, want)
					}
					seen[r.node]++
				}
				if len(seen) != 2 {
					t.Errorf("%s:%d: connections did not spread over both nodes: %v", c.vip, port, seen)
				}
			}
		}
	})

	t.Run("UDP reaches both nodes through both VIPs, SNATed to the VIP", func(t *testing.T) {
		for _, c := range []struct{ src, vip netip.Addr }{{labClient, labVIP}, {labClient6, labVIP6}} {
			seen := map[string]int{}
			for sport := uint16(41100); sport < 41116; sport++ {
				u := newUDPClient(t, client, netip.AddrPortFrom(c.src, sport), netip.AddrPortFrom(c.vip, 53))
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
			r, err := dialTCP(client, netip.AddrPortFrom(labClient, sport), netip.AddrPortFrom(labVIP, 83), 3*time.Second)
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

	t.Run("after a takeover the node may speak first", func(t *testing.T) {
		accepted, received := holdServers(t, nodes)
		st := state
		st.Services = append(slices.Clone(state.Services), holdService(labVIP, labVIP6))
		sync(st)
		defer sync(state)
		takeoverChecks(t, client, lb, []clientVIP{{labClient, labVIP}, {labClient6, labVIP6}}, accepted, received)
	})

	t.Run("a source outside the ranges is dropped", func(t *testing.T) {
		for _, c := range []struct{ src, vip netip.Addr }{{labClientBad, labVIP}, {labClientBad6, labVIP6}} {
			_, err := dialTCP(client, netip.AddrPortFrom(c.src, 0), netip.AddrPortFrom(c.vip, 80), time.Second)
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
			_, err := dialTCP(client, netip.AddrPortFrom(src, 0), netip.AddrPortFrom(vip, 81), 3*time.Second)
			if !errors.Is(err, syscall.ECONNREFUSED) || time.Since(start) > time.Second {
				t.Errorf("TCP to %s:81: got %v after %v, want connection refused at once", vip, err, time.Since(start))
			}
			u := newUDPClient(t, client, netip.AddrPortFrom(src, 0), netip.AddrPortFrom(vip, 82))
			if _, err := u.ask(time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("UDP to %s:82: got %v, want connection refused (port unreachable)", vip, err)
			}
		}
	})

	t.Run("an unhealthy backend gets no new flows, and its UDP flows move", func(t *testing.T) {
		// Find a UDP flow on node-b and one on node-a before node-b fails.
		var onA, onB *udpClient
		for sport := uint16(41300); sport < 41340 && (onA == nil || onB == nil); sport++ {
			u := newUDPClient(t, client, netip.AddrPortFrom(labClient, sport), netip.AddrPortFrom(labVIP, 53))
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
				r, err := dialTCP(client, netip.AddrPortFrom(src, sport), netip.AddrPortFrom(vip, 80), 3*time.Second)
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

	t.Run("DeleteFlowsTo deletes the entries of the given addresses only", func(t *testing.T) {
		for _, to := range []netip.AddrPort{netip.AddrPortFrom(labVIP, 53), netip.AddrPortFrom(labVIP6, 53)} {
			from := netip.AddrPortFrom(labClient, 44000)
			if to.Addr().Is6() {
				from = netip.AddrPortFrom(labClient6, 44000)
			}
			if _, err := newUDPClient(t, client, from, to).ask(time.Second); err != nil {
				t.Fatal(err)
			}
		}
		count := func(a netip.Addr) int {
			t.Helper()
			n := 0
			fam := netlink.InetFamily(unix.AF_INET)
			if a.Is6() {
				fam = unix.AF_INET6
			}
			if err := lb.Do(func() error {
				flows, err := netlink.ConntrackTableList(netlink.ConntrackTable, fam)
				for _, f := range flows {
					if d, ok := netip.AddrFromSlice(f.Forward.DstIP); ok && d.Unmap() == a {
						n++
					}
				}
				return err
			}); err != nil {
				t.Fatal(err)
			}
			return n
		}
		if count(labVIP) == 0 || count(labVIP6) == 0 {
			t.Fatalf("no conntrack entries to start with: %d to %s, %d to %s", count(labVIP), labVIP, count(labVIP6), labVIP6)
		}
		if err := lb.Do(func() error { return NetlinkConntrack{}.DeleteFlowsTo(context.Background(), []netip.Addr{labVIP}) }); err != nil {
			t.Fatal(err)
		}
		if n := count(labVIP); n != 0 {
			t.Errorf("%d entries to %s after DeleteFlowsTo(%s)", n, labVIP, labVIP)
		}
		if count(labVIP6) == 0 {
			t.Errorf("DeleteFlowsTo(%s) deleted the entries to %s too", labVIP, labVIP6)
		}
	})

	t.Run("removing a service and a full resync work on the real nft", func(t *testing.T) {
		state.Services = state.Services[:2] // lab/down goes
		sync(state)
		if out := nft(t, lb, "list", "ruleset"); strings.Contains(out, "lab/down") {
			t.Errorf("chains of a removed service remain:\n%s", out)
		}
		before := nft(t, lb, "list", "ruleset")
		syncer.ForceFullSync()
		sync(state)
		if after := nft(t, lb, "list", "ruleset"); after != before {
			t.Errorf("a full resync changed the ruleset:\nbefore:\n%s\nafter:\n%s", before, after)
		}
		if _, err := dialTCP(client, netip.AddrPortFrom(labClient, 43000), netip.AddrPortFrom(labVIP, 80), 3*time.Second); err != nil {
			t.Errorf("forwarding after the full resync: %v", err)
		}
	})

	t.Run("a full sync repairs a hand edit that partial syncs do not see", func(t *testing.T) {
		good := nft(t, lb, "list", "ruleset")
		bucketMap := bucketMapName("lab/web", Port{Protocol: TCP, Port: 80, NodePort: labTCPNodePort})
		nft(t, lb, "flush", "map", "ip", TableName, bucketMap)
		dst := netip.AddrPortFrom(labVIP, 80)
		if _, err := dialTCP(client, netip.AddrPortFrom(labClient, 43100), dst, time.Second); err == nil {
			t.Fatalf("%s still answered with its bucket map flushed", dst)
		}
		sync(state) // nothing changed in the state: a partial sync writes nothing
		if _, err := dialTCP(client, netip.AddrPortFrom(labClient, 43101), dst, time.Second); err == nil {
			t.Fatalf("a partial sync repaired the map: the test shows nothing")
		}
		syncer.ForceFullSync()
		sync(state)
		if got := nft(t, lb, "list", "ruleset"); got != good {
			t.Errorf("after the full sync the ruleset differs from before the edit:\nbefore:\n%s\nafter:\n%s", good, got)
		}
		if _, err := dialTCP(client, netip.AddrPortFrom(labClient, 43102), dst, 3*time.Second); err != nil {
			t.Errorf("%s after the full sync: %v", dst, err)
		}
	})

	t.Run("Cleanup removes our tables", func(t *testing.T) {
		if err := lb.Do(func() error { return syncer.Cleanup(context.Background()) }); err != nil {
			t.Fatal(err)
		}
		if out := nft(t, lb, "list", "tables"); strings.TrimSpace(out) != "" {
			t.Errorf("tables left after Cleanup:\n%s", out)
		}
	})
}

// clientVIP is a client address and the VIP of its family.
type clientVIP struct{ src, vip netip.Addr }

// holdService forwards TCP and UDP port 88 of vips to the hold servers
// (holdServers) on labHoldNodePort of both lab nodes.
func holdService(vips ...netip.Addr) Service {
	svc := newService("lab/hold", withPort(TCP, 88, labHoldNodePort), withPort(UDP, 88, labHoldNodePort),
		withBackend("node-a", true, labNodes["node-a"]...), withBackend("node-b", true, labNodes["node-b"]...))
	svc.VIPs = vips
	return svc
}

// holdServers starts a TCP and a UDP hold server on labHoldNodePort of
// each node and returns what they accept and receive.
func holdServers(t *testing.T, nodes map[string]*netlab.Host) (chan net.Conn, chan datagram) {
	t.Helper()
	accepted := make(chan net.Conn, 4)
	received := make(chan datagram, 16)
	for _, h := range nodes {
		holdServer(t, h, labHoldNodePort, accepted)
		holdUDPServer(t, h, labHoldNodePort, received)
	}
	return accepted, received
}

// takeoverChecks checks that flows through lb to holdService's port 88
// live on when lb takes their address over while the node speaks first.
//
// A host that takes an address over has no conntrack entry for the flows
// through it (its agent deletes the address's entries before it adds or
// advertises the address). The first packet of such a flow it sees may
// come from the node (a keepalive probe, a server that pushes, a UDP
// answer): to the VIP and the client's port, which no rule translates. The
// host's own stack would answer it with a reset or a port unreachable, and
// a host that routes the VIP back out would make an entry for it that
// moves the client's next packet to another source port; dropped, TCP
// sends it again after the client's next packet has made the entry.
func takeoverChecks(t *testing.T, client, lb *netlab.Host, families []clientVIP, accepted <-chan net.Conn, received <-chan datagram) {
	t.Helper()
	takeover := func(t *testing.T, vip netip.Addr) {
		t.Helper()
		if err := lb.Do(func() error { return NetlinkConntrack{}.DeleteFlowsTo(context.Background(), []netip.Addr{vip}) }); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("TCP: the connection lives on", func(t *testing.T) {
		for _, c := range families {
			conn, server := holdConn(t, client, c.vip, accepted)
			if err := sendLine(conn, server, "hello"); err != nil {
				t.Fatalf("%s: client to node: %v", c.vip, err)
			}
			takeover(t, c.vip)
			if _, err := server.Write([]byte("pushed\n")); err != nil {
				t.Fatalf("%s: the node's write: %v", c.vip, err)
			}
			time.Sleep(300 * time.Millisecond) // the node's first try reaches the host
			if err := sendLine(conn, server, "still there"); err != nil {
				t.Errorf("%s: client to node after the node spoke first: %v", c.vip, err)
				continue
			}
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			if line, err := bufio.NewReader(conn).ReadString('\n'); err != nil || line != "pushed\n" {
				t.Errorf("%s: the node's data after the takeover: %q, %v", c.vip, line, err)
			}
		}
	})

	// The node's datagram is lost either way; answered by the host with a
	// port unreachable, or routed back out, it also left an entry that made
	// the client's next datagram leave with another source port: a new flow
	// at the node.
	t.Run("UDP: the flow keeps its node and port", func(t *testing.T) {
		receive := func(t *testing.T, want string) datagram {
			t.Helper()
			select {
			case d := <-received:
				if d.data != want {
					t.Fatalf("%s received %q, want %q", d.node, d.data, want)
				}
				return d
			case <-time.After(3 * time.Second):
				t.Fatalf("no node received %q", want)
			}
			return datagram{}
		}
		for _, c := range families {
			u := newUDPClient(t, client, netip.AddrPortFrom(c.src, 0), netip.AddrPortFrom(c.vip, 88))
			if _, err := u.c.Write([]byte("first")); err != nil {
				t.Fatal(err)
			}
			first := receive(t, "first")
			takeover(t, c.vip)
			if _, err := first.pc.WriteTo([]byte("pushed"), first.from); err != nil {
				t.Fatalf("%s: the node's datagram: %v", c.vip, err)
			}
			time.Sleep(100 * time.Millisecond) // the node's datagram reaches the host
			if _, err := u.c.Write([]byte("second")); err != nil {
				t.Fatal(err)
			}
			second := receive(t, "second")
			if second.node != first.node || second.from.String() != first.from.String() {
				t.Errorf("%s: the client's datagram after the node's reached %s from %s, the first reached %s from %s: another flow",
					c.vip, second.node, second.from, first.node, first.from)
				continue
			}
			if _, err := second.pc.WriteTo([]byte("answer"), second.from); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 64)
			_ = u.c.SetReadDeadline(time.Now().Add(3 * time.Second))
			if n, err := u.c.Read(buf); err != nil || string(buf[:n]) != "answer" {
				t.Errorf("%s: the node's answer after the takeover: %q, %v", c.vip, buf[:n], err)
			}
		}
	})
}

// holdConn connects from client to port 88 of vip and returns both ends of
// the connection, the node's as its hold server accepted it; both are
// closed when the test ends.
func holdConn(t *testing.T, client *netlab.Host, vip netip.Addr, accepted <-chan net.Conn) (conn, server net.Conn) {
	t.Helper()
	if err := client.Do(func() error {
		var err error
		conn, err = net.DialTimeout("tcp", netip.AddrPortFrom(vip, 88).String(), 3*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	select {
	case server = <-accepted:
	case <-time.After(3 * time.Second):
		t.Fatalf("%s: no node accepted the connection", vip)
	}
	t.Cleanup(func() { server.Close() })
	return conn, server
}

// nft runs the nft binary in h.
func nft(t *testing.T, h *netlab.Host, args ...string) string {
	t.Helper()
	return runIn(t, h, "nft", args...)
}

// addAddr adds an address to h's link beside the one the lab gave it.
func addAddr(t *testing.T, h *netlab.Host, p netip.Prefix) {
	t.Helper()
	args := []string{"addr", "add", p.String(), "dev", h.Iface}
	if p.Addr().Is6() {
		args = append(args, "nodad")
	}
	runIn(t, h, "ip", args...)
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

// A bucket map's elements written as one list (BatchBucketElements) give
// the kernel the same table as one command per element, on a full sync and
// on the partial syncs after it.
func TestKernelBatchedBucketElements(t *testing.T) {
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("kernel test: no nft binary")
	}
	l := netlab.NewT(t, netlab.Options{Subnet6: labSubnet6}) // skips with -short or without root
	lb := l.AddHostT(t, "lb", netlab.HostOptions{Addr4: labLB, Addr6: labLB6})
	states := []State{realisticState(), withHealth(realisticState(), "node-b", false), realisticState()}
	list := func(batch bool) []string {
		var out []string
		if err := lb.Do(func() error {
			nft4, err := NewNFTables(knftables.IPv4Family)
			if err != nil {
				return err
			}
			s := NewSyncer(nft4, nil, nil, nil)
			if batch {
				s.BatchBucketElements()
			}
			for _, st := range states {
				if _, err := s.Sync(context.Background(), st); err != nil {
					return err
				}
				out = append(out, nft(t, lb, "list", "table", "ip", TableName))
			}
			return s.Cleanup(context.Background())
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	one, batched := list(false), list(true)
	for i := range states {
		if one[i] != batched[i] {
			t.Errorf("sync %d: the batched table differs:\none command per element:\n%s\nbatched:\n%s", i, one[i], batched[i])
		}
	}
	if !strings.Contains(one[0], "elements = {") {
		t.Errorf("no bucket map elements in the table: the test shows nothing:\n%s", one[0])
	}
}

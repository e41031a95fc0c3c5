package dataplane

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/knftables"

	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

// TestKernelTrafficCounters sends known TCP and UDP traffic, IPv4 and
// IPv6, from a client through a VIP, in proxy and in passthrough
// forwarding, and checks the load-balancer host's counters against it:
// received packets and bytes equal what the client's own output hook
// counted for the VIP's port (so the same IP packets, headers included,
// and the payload plus at most a header's worth each), and in proxy
// forwarding the new connections per node equal the flows each node
// served, and connections held open are counted per node from conntrack
// (checkCurrentConnections). A partial sync halfway must not reset them.
func TestKernelTrafficCounters(t *testing.T) {
	for _, bin := range []string{"nft", "ip"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("kernel test: no %s binary", bin)
		}
	}
	for _, mode := range []Forwarding{Proxy, Passthrough} {
		t.Run(string(mode), func(t *testing.T) { testTrafficCounters(t, mode) })
	}
}

func testTrafficCounters(t *testing.T, mode Forwarding) {
	l := netlab.NewT(t, netlab.Options{Subnet6: labSubnet6}) // skips with -short or without root
	client := l.AddHostT(t, "client", netlab.HostOptions{Addr4: labClient, Addr6: labClient6})
	lb := l.AddHostT(t, "lb", netlab.HostOptions{Addr4: labLB, Addr6: labLB6, Forwarding: mode == Proxy, Sysctls: map[string]string{
		"net.ipv4.conf.all.send_redirects":  "0",
		"net.ipv4.conf.eth0.send_redirects": "0",
	}})
	addAddr(t, lb, netip.PrefixFrom(labVIP, 32))
	// As the agent adds it: deprecated, so never a source address.
	runIn(t, lb, "ip", "addr", "add", netip.PrefixFrom(labVIP6, 128).String(), "dev", lb.Iface, "nodad", "preferred_lft", "0")
	for _, node := range slices.Sorted(maps.Keys(labNodes)) {
		ips := labNodes[node]
		h := l.AddHostT(t, node, netlab.HostOptions{Addr4: netip.MustParseAddr(ips[0]), Addr6: netip.MustParseAddr(ips[1])})
		countingServers(t, h, labTCPNodePort, labUDPNodePort)
		if mode == Passthrough {
			kubeProxyStandIn(t, h, labVIP, labVIP6)
		}
	}
	st := State{Interface: "eth0", Links: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), labSubnet6}, Services: []Service{
		newService("lab/count", withVIPs(labVIP.String(), labVIP6.String()), withForwarding(mode),
			withPort(TCP, 80, labTCPNodePort), withPort(UDP, 53, labUDPNodePort),
			withBackend("node-a", true, labNodes["node-a"]...), withBackend("node-b", true, labNodes["node-b"]...))}}

	var syncer *Syncer
	lbDo(t, lb, func() error {
		var nfts [3]knftables.Interface
		for i, f := range families {
			var err error
			if nfts[i], err = NewNFTables(f); err != nil {
				return err
			}
		}
		syncer = NewSyncer(nfts[0], nfts[1], nfts[2], NetlinkConntrack{}).BatchBucketElements().CountTraffic(countAll)
		_, err := syncer.Sync(context.Background(), st)
		return err
	})
	watch := watchClientOutput(t, client)

	served := map[string]int{} // flows by "<proto> <vip> <node>"
	var payload = map[string]int{}
	send := func(round int) {
		for _, vip := range []netip.Addr{labVIP, labVIP6} {
			for i := range 6 {
				msg := strings.Repeat("t", 100*(i+1)+round)
				node := tcpExchange(t, client, netip.AddrPortFrom(vip, 80), msg)
				served["tcp "+vip.String()+" "+node]++
				payload["tcp "+vip.String()] += len(msg)
			}
			for i := range 4 {
				msgs := []string{strings.Repeat("u", 50+i), strings.Repeat("v", 200+round)}
				node := udpExchange(t, client, netip.AddrPortFrom(vip, 53), msgs)
				served["udp "+vip.String()+" "+node]++
				payload["udp "+vip.String()] += len(msgs[0]) + len(msgs[1])
			}
		}
	}
	send(0)
	// A partial sync (another service) must leave the counters alone.
	st.Services = append(st.Services, newService("lab/other", withVIPs(labVIP.String()), withForwarding(mode),
		withPort(TCP, 90, labTCPNodePort+10), withBackend("node-a", true, labNodes["node-a"]...)))
	lbDo(t, lb, func() error { _, err := syncer.Sync(context.Background(), st); return err })
	send(1)

	for _, fe := range []struct {
		proto Protocol
		vip   netip.Addr
		port  uint16
	}{{TCP, labVIP, 80}, {UDP, labVIP, 53}, {TCP, labVIP6, 80}, {UDP, labVIP6, 53}} {
		key := fe.proto.nft() + " " + fe.vip.String()
		want := watch.read(t, key)
		var got CounterReading
		conns := map[string]uint64{}
		// The client's last ACKs may still be on their way: wait until the
		// counts settle, then compare.
		for try := 0; try < 50; try++ {
			got, conns = lbCounters(t, lb, syncer, fe.proto, fe.vip, fe.port)
			if got.Packets == want.packets && got.Bytes == want.bytes {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if got.Packets != want.packets || got.Bytes != want.bytes {
			t.Errorf("%s port %d: received %d packets, %d bytes; the client sent %d packets, %d bytes",
				key, fe.port, got.Packets, got.Bytes, want.packets, want.bytes)
		}
		maxHeader := uint64(20 + 60) // IPv4 and TCP with options
		if fe.vip.Is6() {
			maxHeader = 40 + 60
		}
		if p := uint64(payload[key]); got.Bytes < p || got.Bytes > p+got.Packets*maxHeader {
			t.Errorf("%s: %d bytes received for %d bytes of payload in %d packets", key, got.Bytes, p, got.Packets)
		}
		for _, node := range slices.Sorted(maps.Keys(labNodes)) {
			w := uint64(served[key+" "+node])
			if mode == Passthrough {
				w = 0 // no connections are kept, none are counted
			}
			if conns[node] != w {
				t.Errorf("%s port %d: %d new connections counted to %s, it served %d", key, fe.port, conns[node], node, w)
			}
		}
		t.Logf("%s port %d: %d packets, %d bytes (%d of payload), connections %v", key, fe.port, got.Packets, got.Bytes, payload[key], conns)
	}

	if mode == Proxy {
		checkCurrentConnections(t, client, lb, syncer)
	}

	// A partial sync deletes the counters of a service that went, a full
	// sync without counting every counter.
	st.Services = st.Services[:1]
	lbDo(t, lb, func() error { _, err := syncer.Sync(context.Background(), st); return err })
	if listed := nft(t, lb, "list", "counters"); strings.Contains(listed, "lab/other") {
		t.Errorf("counters of lab/other left after it went:\n%s", listed)
	}
	lbDo(t, lb, func() error {
		nfts := make([]knftables.Interface, len(families))
		for i, f := range families {
			var err error
			if nfts[i], err = NewNFTables(f); err != nil {
				return err
			}
		}
		_, err := NewSyncer(nfts[0], nfts[1], nfts[2], nil).Sync(context.Background(), st)
		return err
	})
	if listed := nft(t, lb, "list", "counters"); strings.Contains(listed, "counter ") {
		t.Errorf("counters left after a full sync without counting:\n%s", listed)
	}
}

func lbDo(t *testing.T, lb *netlab.Host, f func() error) {
	t.Helper()
	if err := lb.Do(f); err != nil {
		t.Fatalf("in the lb namespace: %v", err)
	}
}

// lbCounters reads the load-balancer host's counters of one frontend: the
// received one and the new connections by node.
func lbCounters(t *testing.T, lb *netlab.Host, s *Syncer, proto Protocol, vip netip.Addr, port uint16) (CounterReading, map[string]uint64) {
	t.Helper()
	var readings []CounterReading
	lbDo(t, lb, func() error {
		var err error
		readings, err = s.ReadCounters(context.Background())
		return err
	})
	var received CounterReading
	conns := map[string]uint64{}
	for _, r := range readings {
		if r.Protocol != proto || r.VIP != vip || r.Port != port || r.Service != "lab/count" {
			continue
		}
		switch r.Kind {
		case CountReceived:
			received = r
		case CountConnections:
			conns[r.Node] = r.Packets
		}
	}
	if received.Name == "" {
		t.Fatalf("no received counter of %s %s port %d among %d", proto, vip, port, len(readings))
	}
	return received, conns
}

// countingServers serve the NodePorts in h: TCP reads until the client's
// end of stream, answers "<node>" and closes; UDP answers each datagram
// with "<node>".
func countingServers(t *testing.T, h *netlab.Host, tcpPort, udpPort int) {
	t.Helper()
	ln, pc := listenBoth(t, h, tcpPort, udpPort)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(io.Discard, c)
				_, _ = io.WriteString(c, h.Name)
			}()
		}
	}()
	go func() {
		buf := make([]byte, 2048)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo([]byte(h.Name), from)
		}
	}()
}

// tcpExchange sends msg on a new connection to dst, closes its side and
// returns the node that answered; the connection ends in order (no reset).
func tcpExchange(t *testing.T, h *netlab.Host, dst netip.AddrPort, msg string) string {
	t.Helper()
	var node []byte
	err := h.Do(func() error {
		c, err := net.DialTimeout("tcp", dst.String(), 5*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, msg); err != nil {
			return err
		}
		if err := c.(*net.TCPConn).CloseWrite(); err != nil {
			return err
		}
		node, err = io.ReadAll(c)
		return err
	})
	if err != nil || len(node) == 0 {
		t.Fatalf("TCP to %s: %q, %v", dst, node, err)
	}
	return string(node)
}

// udpExchange sends msgs, one datagram each, from a new socket (one flow)
// to dst, waits for the answer to each, and returns the node that
// answered.
func udpExchange(t *testing.T, h *netlab.Host, dst netip.AddrPort, msgs []string) string {
	t.Helper()
	var node string
	err := h.Do(func() error {
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(dst))
		if err != nil {
			return err
		}
		defer c.Close()
		buf := make([]byte, 512)
		for _, m := range msgs {
			if _, err := c.Write([]byte(m)); err != nil {
				return err
			}
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			n, err := c.Read(buf)
			if err != nil {
				return err
			}
			node = string(buf[:n])
		}
		return nil
	})
	if err != nil {
		t.Fatalf("UDP to %s: %v", dst, err)
	}
	return node
}

// clientWatch counts, in the client's output hook, the packets and bytes
// it sends to each frontend of the test.
type clientWatch struct {
	host *netlab.Host
}

type sent struct{ packets, bytes uint64 }

const clientWatchTable = "watch"

func watchClientOutput(t *testing.T, client *netlab.Host) clientWatch {
	t.Helper()
	var rules strings.Builder
	fmt.Fprintf(&rules, "add table inet %s\n", clientWatchTable)
	fmt.Fprintf(&rules, "add chain inet %s out { type filter hook output priority 0 ; }\n", clientWatchTable)
	for _, fe := range []struct {
		ip, vip, proto string
		port           int
	}{{"ip", labVIP.String(), "tcp", 80}, {"ip", labVIP.String(), "udp", 53}, {"ip6", labVIP6.String(), "tcp", 80}, {"ip6", labVIP6.String(), "udp", 53}} {
		name := watchCounterName(fe.proto + " " + fe.vip)
		fmt.Fprintf(&rules, "add counter inet %s %s\n", clientWatchTable, name)
		fmt.Fprintf(&rules, "add rule inet %s out %s daddr %s %s dport %d counter name %s\n", clientWatchTable, fe.ip, fe.vip, fe.proto, fe.port, name)
	}
	cmd := client.Command(t.Context(), "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("client counters: %v: %s", err, out)
	}
	return clientWatch{host: client}
}

func watchCounterName(key string) string {
	return strings.NewReplacer(" ", "-", ":", "_", ".", "_").Replace(key)
}

// read returns what the client sent to the frontend "<proto> <vip>".
func (w clientWatch) read(t *testing.T, key string) sent {
	t.Helper()
	var out sent
	err := w.host.Do(func() error {
		nft, err := knftables.New(knftables.InetFamily, clientWatchTable)
		if err != nil {
			return err
		}
		counters, err := nft.ListCounters(context.Background())
		if err != nil {
			return err
		}
		for _, c := range counters {
			if c.Name == watchCounterName(key) {
				out = sent{*c.Packets, *c.Bytes}
				return nil
			}
		}
		return fmt.Errorf("no counter %s", watchCounterName(key))
	})
	if err != nil {
		t.Fatalf("client counters: %v", err)
	}
	return out
}

// listenBoth listens on TCP port tcpPort and UDP port udpPort in h, until
// the test ends.
func listenBoth(tb testing.TB, h *netlab.Host, tcpPort, udpPort int) (net.Listener, net.PacketConn) {
	tb.Helper()
	var ln net.Listener
	var pc net.PacketConn
	if err := h.Do(func() error {
		var err error
		if ln, err = net.Listen("tcp", fmt.Sprintf(":%d", tcpPort)); err != nil {
			return err
		}
		pc, err = net.ListenPacket("udp", fmt.Sprintf(":%d", udpPort))
		return err
	}); err != nil {
		tb.Fatalf("servers in %s: %v", h.Name, err)
	}
	tb.Cleanup(func() { ln.Close(); pc.Close() })
	return ln, pc
}

// checkCurrentConnections: TCP connections the client holds open through
// the proxy VIP, IPv4 and IPv6, are what NetlinkConntrack CountConnections
// finds per node (ESTABLISHED entries); each node is the one that answers
// when the client ends the connection; once all are closed none is
// counted.
func checkCurrentConnections(t *testing.T, client, lb *netlab.Host, s *Syncer) {
	t.Helper()
	const perVIP = 5
	var held []net.Conn
	t.Cleanup(func() {
		for _, c := range held {
			_ = c.Close()
		}
	})
	for _, vip := range []netip.Addr{labVIP, labVIP6} {
		for range perVIP {
			err := client.Do(func() error {
				c, err := net.DialTimeout("tcp", netip.AddrPortFrom(vip, 80).String(), 5*time.Second)
				if err == nil {
					held = append(held, c)
					_, err = io.WriteString(c, "held")
				}
				return err
			})
			if err != nil {
				t.Fatalf("TCP to %s: %v", vip, err)
			}
		}
	}
	// current is the count per "<vip> <node>" of port 80's connections.
	current := func() map[string]int {
		var readings []CounterReading
		var byName map[string]int
		lbDo(t, lb, func() error {
			var err error
			if readings, err = s.ReadCounters(context.Background()); err != nil {
				return err
			}
			var counters []TrafficCounter
			for _, r := range readings {
				counters = append(counters, r.TrafficCounter)
			}
			byName, err = NetlinkConntrack{}.CountConnections(context.Background(), counters)
			return err
		})
		out := map[string]int{}
		for _, r := range readings {
			if r.Kind == CountConnections && r.Service == "lab/count" && r.Protocol == TCP && r.Port == 80 && byName[r.Name] > 0 {
				out[r.VIP.String()+" "+r.Node] += byName[r.Name]
			}
		}
		return out
	}
	sum := func(m map[string]int, vip netip.Addr) int {
		n := 0
		for k, v := range m {
			if strings.HasPrefix(k, vip.String()+" ") {
				n += v
			}
		}
		return n
	}
	var open map[string]int
	for try := 0; try < 50; try++ {
		if open = current(); sum(open, labVIP) == perVIP && sum(open, labVIP6) == perVIP {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Who served each: the node answers once the client ends its side.
	served := map[string]int{}
	for i, c := range held {
		vip := labVIP
		if i >= perVIP {
			vip = labVIP6
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if err := c.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		node, err := io.ReadAll(c)
		if err != nil || len(node) == 0 {
			t.Fatalf("held connection to %s: %q, %v", vip, node, err)
		}
		served[vip.String()+" "+string(node)]++
		_ = c.Close()
	}
	if !maps.Equal(open, served) {
		t.Errorf("current connections counted %v, the nodes served %v", open, served)
	}
	var after map[string]int
	for try := 0; try < 50; try++ {
		if after = current(); len(after) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(after) != 0 {
		t.Errorf("current connections after all were closed: %v", after)
	}
	t.Logf("current connections while held: %v", open)
}

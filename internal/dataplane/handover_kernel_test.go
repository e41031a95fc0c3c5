package dataplane

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/netip"
	"os/exec"
	"testing"
	"time"

	"sigs.k8s.io/knftables"

	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

// TestKernelHandOver: a proxy VIP moves from one load-balancer host to
// another that is still up (a drain, a rolling update, a take-back), in the
// middle of connections the first host forwarded; the node speaks next (a
// server's greeting after the handshake, a push), and its packet reaches
// the new holder, which has no entry for the flow. With State.HandOver the
// new holder copies it to the previous one, which still has the entry and
// forwards it to the client; without, it is dropped, and a client that
// waits for the server never gets it.
func TestKernelHandOver(t *testing.T) {
	for _, bin := range []string{"nft", "ip"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("kernel test: no %s binary", bin)
		}
	}
	l := netlab.NewT(t, netlab.Options{Subnet6: labSubnet6}) // skips with -short or without root
	client := l.AddHostT(t, "client", netlab.HostOptions{Addr4: labClient, Addr6: labClient6})
	lbAddrs := map[string][2]netip.Addr{
		"lb-1": {labLB, labLB6},
		"lb-2": {netip.MustParseAddr("192.0.2.20"), netip.MustParseAddr("2001:db8::20")},
	}
	lbs := map[string]*netlab.Host{}
	syncers := map[string]*Syncer{}
	for _, name := range []string{"lb-1", "lb-2"} {
		h := l.AddHostT(t, name, netlab.HostOptions{Addr4: lbAddrs[name][0], Addr6: lbAddrs[name][1], Forwarding: true, Sysctls: map[string]string{
			"net.ipv4.conf.all.send_redirects":  "0",
			"net.ipv4.conf.eth0.send_redirects": "0",
		}})
		if err := h.SetSysctl("net/netfilter/nf_conntrack_tcp_loose", "1"); err != nil {
			t.Fatal(err)
		}
		if err := h.Do(func() error {
			nft4, err := NewNFTables(knftables.IPv4Family)
			if err != nil {
				return err
			}
			nft6, err := NewNFTables(knftables.IPv6Family)
			if err != nil {
				return err
			}
			syncers[name] = NewSyncer(nft4, nft6, nil, NetlinkConntrack{})
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		lbs[name] = h
	}
	nodeIPs := labNodes["node-a"]
	node := l.AddHostT(t, "node-a", netlab.HostOptions{Addr4: netip.MustParseAddr(nodeIPs[0]), Addr6: netip.MustParseAddr(nodeIPs[1])})
	accepted := make(chan net.Conn, 4)
	holdServer(t, node, labHoldNodePort, accepted)

	svc := newService("lab/hold", withPort(TCP, 88, labHoldNodePort), withBackend("node-a", true, nodeIPs...))
	svc.VIPs = []netip.Addr{labVIP, labVIP6}
	sync := func(name string, handOver map[netip.Addr]netip.Addr) {
		t.Helper()
		st := State{Services: []Service{svc}, HandOver: handOver}
		if err := lbs[name].Do(func() error {
			res, err := syncers[name].Sync(context.Background(), st)
			return errors.Join(err, res.CleanupErr)
		}); err != nil {
			t.Fatalf("Sync on %s: %v", name, err)
		}
	}
	sync("lb-1", nil)
	sync("lb-2", nil)
	mac2, err := lbs["lb-2"].MAC()
	if err != nil {
		t.Fatal(err)
	}
	// moveTo has the client and the node send to lb-2 for vip, as its
	// announcement does (their neighbour entries), with vip on lb-2 and
	// removed from lb-1, which keeps its conntrack entries.
	moveTo2 := func(t *testing.T, vip netip.Addr) {
		t.Helper()
		addAddr(t, lbs["lb-2"], netip.PrefixFrom(vip, vip.BitLen()))
		runIn(t, lbs["lb-1"], "ip", "addr", "del", netip.PrefixFrom(vip, vip.BitLen()).String(), "dev", lbs["lb-1"].Iface)
		for _, h := range []*netlab.Host{client, node} {
			runIn(t, h, "ip", "neigh", "replace", vip.String(), "lladdr", mac2, "dev", h.Iface, "nud", "reachable")
		}
	}
	// moveBack undoes moveTo2 but for vip on lb-1 (greeting adds it) and
	// forgets the flows.
	moveBack := func(t *testing.T, vip netip.Addr) {
		t.Helper()
		runIn(t, lbs["lb-2"], "ip", "addr", "del", netip.PrefixFrom(vip, vip.BitLen()).String(), "dev", lbs["lb-2"].Iface)
		for _, h := range lbs {
			if err := h.Do(func() error { return NetlinkConntrack{}.DeleteFlowsTo(context.Background(), []netip.Addr{vip}) }); err != nil {
				t.Fatal(err)
			}
		}
	}
	// greeting connects through lb-1, moves vip to lb-2, has the node
	// write first and returns what the client read within wait.
	greeting := func(t *testing.T, vip netip.Addr, wait time.Duration) (string, error) {
		t.Helper()
		addAddr(t, lbs["lb-1"], netip.PrefixFrom(vip, vip.BitLen()))
		mac1, err := lbs["lb-1"].MAC()
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range []*netlab.Host{client, node} {
			runIn(t, h, "ip", "neigh", "replace", vip.String(), "lladdr", mac1, "dev", h.Iface, "nud", "reachable")
		}
		conn, server := holdConn(t, client, vip, accepted)
		moveTo2(t, vip)
		defer moveBack(t, vip)
		if _, err := server.Write([]byte("greeting\n")); err != nil {
			t.Fatalf("%s: the node's write: %v", vip, err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(wait))
		return bufio.NewReader(conn).ReadString('\n')
	}

	for _, vip := range []netip.Addr{labVIP, labVIP6} {
		t.Run("without a hand-over "+vip.String(), func(t *testing.T) {
			// The control: lb-2 drops the node's packet, and the client,
			// waiting for the server, hears nothing.
			if line, err := greeting(t, vip, time.Second); err == nil {
				t.Fatalf("the greeting %q arrived without a hand-over: the test shows nothing", line)
			}
		})
		t.Run("with a hand-over "+vip.String(), func(t *testing.T) {
			prev := lbAddrs["lb-1"][0]
			if vip.Is6() {
				prev = lbAddrs["lb-1"][1]
			}
			sync("lb-2", map[netip.Addr]netip.Addr{vip: prev})
			defer sync("lb-2", nil)
			if line, err := greeting(t, vip, 3*time.Second); err != nil || line != "greeting\n" {
				t.Errorf("the node's greeting after the hand-over: %q, %v", line, err)
			}
		})
	}
}

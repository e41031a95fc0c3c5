package dataplane

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"sigs.k8s.io/knftables"

	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

// The routed lab: VIPs routed to the load-balancer host, as BGP has them.
// On the kernel lab's segment a router routes the routed VIPs (outside the
// segment's subnets) to the load-balancer host, as a BGP route would; the
// load-balancer host does not hold them on an interface, and its default
// route points back at the router. The client and the nodes reach the VIPs
// through the router.
var (
	labRouter     = netip.MustParseAddr("192.0.2.20")
	labRouter6    = netip.MustParseAddr("2001:db8::20")
	labRoutedVIP  = netip.MustParseAddr("198.51.100.100")
	labRoutedVIP6 = netip.MustParseAddr("2001:db8:bb::100")
)

// routedLab is the routed lab's hosts and the Syncer of its lb host.
type routedLab struct {
	client, router, lb *netlab.Host
	nodes              map[string]*netlab.Host
	syncer             *Syncer
}

func newRoutedLab(t *testing.T) *routedLab {
	t.Helper()
	l := netlab.NewT(t, netlab.Options{Subnet6: labSubnet6}) // skips with -short or without root
	// Everything is on one segment: the router and the lb host forward out
	// of the link they received on, and must not redirect the sender to
	// the next hop (nor the others heed a redirect), or packets would
	// bypass the router.
	forwarder := map[string]string{
		"net.ipv4.conf.all.send_redirects":  "0",
		"net.ipv4.conf.eth0.send_redirects": "0",
	}
	host := map[string]string{
		"net.ipv4.conf.all.accept_redirects":  "0",
		"net.ipv4.conf.eth0.accept_redirects": "0",
		"net.ipv6.conf.all.accept_redirects":  "0",
		"net.ipv6.conf.eth0.accept_redirects": "0",
	}
	r := &routedLab{nodes: map[string]*netlab.Host{}}
	r.client = l.AddHostT(t, "client", netlab.HostOptions{Addr4: labClient, Addr6: labClient6, Sysctls: host})
	r.router = l.AddHostT(t, "router", netlab.HostOptions{Addr4: labRouter, Addr6: labRouter6, Forwarding: true, Sysctls: forwarder})
	r.lb = l.AddHostT(t, "lb", netlab.HostOptions{Addr4: labLB, Addr6: labLB6, Forwarding: true, Sysctls: forwarder})
	for _, node := range []string{"node-a", "node-b"} {
		ips := labNodes[node]
		r.nodes[node] = l.AddHostT(t, node, netlab.HostOptions{Addr4: netip.MustParseAddr(ips[0]), Addr6: netip.MustParseAddr(ips[1]), Sysctls: host})
	}
	for _, h := range []*netlab.Host{r.client, r.nodes["node-a"], r.nodes["node-b"]} {
		runIn(t, h, "ip", "route", "add", netip.PrefixFrom(labRoutedVIP, 32).String(), "via", labRouter.String())
		runIn(t, h, "ip", "-6", "route", "add", netip.PrefixFrom(labRoutedVIP6, 128).String(), "via", labRouter6.String())
	}
	runIn(t, r.router, "ip", "route", "add", netip.PrefixFrom(labRoutedVIP, 32).String(), "via", labLB.String())
	runIn(t, r.router, "ip", "-6", "route", "add", netip.PrefixFrom(labRoutedVIP6, 128).String(), "via", labLB6.String())
	runIn(t, r.lb, "ip", "route", "add", "default", "via", labRouter.String())
	runIn(t, r.lb, "ip", "-6", "route", "add", "default", "via", labRouter6.String())
	if err := r.lb.SetSysctl("net/netfilter/nf_conntrack_tcp_loose", "1"); err != nil {
		t.Fatal(err)
	}

	// Packets to port 9 of the routed VIPs, which no service uses: those
	// the router forwards, and those the lb host sends out.
	for _, c := range []struct {
		h    *netlab.Host
		hook string
	}{{r.router, "forward"}, {r.lb, "postrouting"}} {
		runInWithStdin(t, c.h, `table inet count {
 chain count {
  type filter hook `+c.hook+` priority 0; policy accept;
  ip daddr `+labRoutedVIP.String()+` udp dport 9 counter
  ip6 daddr `+labRoutedVIP6.String()+` udp dport 9 counter
 }
}
`, "nft", "-f", "-")
	}

	if err := r.lb.Do(func() error {
		var nfts [3]knftables.Interface
		for i, f := range families {
			var err error
			if nfts[i], err = NewNFTables(f); err != nil {
				return err
			}
		}
		r.syncer = NewSyncer(nfts[0], nfts[1], nfts[2], NetlinkConntrack{}).BatchBucketElements()
		return nil
	}); err != nil {
		t.Fatalf("nftables in the lb namespace: %v", err)
	}
	return r
}

func (r *routedLab) sync(t *testing.T, st State) {
	t.Helper()
	if err := r.lb.Do(func() error {
		res, err := r.syncer.Sync(context.Background(), st)
		return errors.Join(err, res.CleanupErr)
	}); err != nil {
		t.Fatalf("Sync in the lb namespace: %v", err)
	}
}

// unusedPortChecks sends one datagram per family to port 9 of the routed
// VIPs, which no service uses, and counts how often it crosses the router
// and leaves the lb host. Routed back out, it would go to the router, which
// sends it to the lb host again, until its TTL runs out: every datagram
// sent to the address would cross the uplink dozens of times. The lb host
// drops it instead: the router forwards it once, the lb host never.
func (r *routedLab) unusedPortChecks(t *testing.T) {
	t.Helper()
	for i, c := range []clientVIP{{labClient, labRoutedVIP}, {labClient6, labRoutedVIP6}} {
		routerBefore := tableCounters(t, r.router, "inet count", 2)[i]
		lbBefore := tableCounters(t, r.lb, "inet count", 2)[i]
		u := newUDPClient(t, r.client, netip.AddrPortFrom(c.src, 0), netip.AddrPortFrom(c.vip, 9))
		if _, err := u.c.Write([]byte("anyone there?")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond) // the datagram's TTL runs out within milliseconds
		routed := tableCounters(t, r.router, "inet count", 2)[i] - routerBefore
		back := tableCounters(t, r.lb, "inet count", 2)[i] - lbBefore
		if routed != 1 || back != 0 {
			t.Errorf("one datagram to %s:9: the router forwarded it %d times and the lb host sent it back %d times, want once and never",
				c.vip, routed, back)
		}
	}
}

// A BGP address is not a local address of the load-balancer host: what no
// rule translates for it is forwarded, not delivered. The guarantees of
// the takeover test of TestKernelDataPlane hold for it too, and a packet
// to a port no service uses is dropped rather than sent back to the router.
func TestKernelRoutedVIPs(t *testing.T) {
	r := newRoutedLab(t)
	vips := []netip.Addr{labRoutedVIP, labRoutedVIP6}
	families := []clientVIP{{labClient, labRoutedVIP}, {labClient6, labRoutedVIP6}}

	t.Run("proxy", func(t *testing.T) {
		accepted, received := holdServers(t, r.nodes)
		hold := holdService(vips...)
		hold.Routed = true
		r.sync(t, State{Services: []Service{hold}})
		t.Run("after a takeover the node may speak first", func(t *testing.T) {
			takeoverChecks(t, r.client, r.lb, families, accepted, received)
		})
		t.Run("a datagram to a port no service uses is dropped at the lb host", r.unusedPortChecks)
	})

	t.Run("passthrough", func(t *testing.T) {
		for _, h := range r.nodes {
			serve(t, h, labTCPNodePort, labUDPNodePort)
			kubeProxyStandIn(t, h, labRoutedVIP, labRoutedVIP6)
		}
		web := newService("lab/web", withForwarding(Passthrough), withRouted(),
			withPort(TCP, 80, labTCPNodePort), withPort(UDP, 53, labUDPNodePort),
			withBackend("node-a", true, labNodes["node-a"]...), withBackend("node-b", true, labNodes["node-b"]...))
		web.VIPs = vips
		r.sync(t, State{Interface: "eth0", Links: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), labSubnet6}, Services: []Service{web}})
		t.Run("a served port answers through the router", func(t *testing.T) {
			for _, c := range families {
				if _, err := dialTCP(r.client, netip.AddrPortFrom(c.src, 0), netip.AddrPortFrom(c.vip, 80), 3*time.Second); err != nil {
					t.Errorf("TCP to %s:80: %v", c.vip, err)
				}
			}
		})
		t.Run("a datagram to a port no service uses is dropped at the lb host", r.unusedPortChecks)
	})
}

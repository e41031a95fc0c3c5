package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"sigs.k8s.io/knftables"

	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

// The passthrough lab: the kernel lab's segment, with a load-balancer host
// that forwards in the netdev table only and nodes that serve the VIPs
// themselves through an nft DNAT standing in for kube-proxy with ipMode
// VIP. The load-balancer host "lb" is also a node in one subtest.
var ptNodes = map[string][]string{"node-a": labNodes["node-a"], "node-b": labNodes["node-b"], "lb": {labLB.String(), labLB6.String()}}

// ptState forwards lab/web (TCP 80, UDP 53) to the given backends,
// lab/only (TCP 84) from labClient only, lab/sticky (TCP 83) with ClientIP
// affinity, and lab/down (TCP 81) to no healthy node.
func ptState(self string, backends ...Backend) State {
	web := newService("lab/web", withVIPs(labVIP.String(), labVIP6.String()), withForwarding(Passthrough),
		withPort(TCP, 80, labTCPNodePort), withPort(UDP, 53, labUDPNodePort))
	web.Backends = backends
	only := newService("lab/only", withVIPs(labVIP.String(), labVIP6.String()), withForwarding(Passthrough),
		withPort(TCP, 84, labTCPNodePort), withSourceRanges(labClient.String()+"/32", labClient6.String()+"/128"))
	only.Backends = backends
	down := newService("lab/down", withVIPs(labVIP.String(), labVIP6.String()), withForwarding(Passthrough),
		withPort(TCP, 81, labTCPNodePort), withBackend("node-a", false, labNodes["node-a"]...))
	sticky := newService("lab/sticky", withVIPs(labVIP.String(), labVIP6.String()), withForwarding(Passthrough),
		withPort(TCP, 83, labTCPNodePort), withAffinity())
	sticky.Backends = backends
	return State{Self: self, Interface: "eth0", Services: []Service{web, only, down, sticky},
		Links: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), labSubnet6}}
}

func ptBackend(node string, healthy bool) Backend {
	return Backend{Node: node, Addrs: addrs(ptNodes[node]...), Healthy: healthy}
}

// kubeProxyStandIn makes h serve vip4 and vip6 as kube-proxy does for a
// Service with ipMode VIP: it DNATs them to its own NodePort servers.
func kubeProxyStandIn(t *testing.T, h *netlab.Host, vip4, vip6 netip.Addr) {
	t.Helper()
	var b strings.Builder
	b.WriteString("table inet kube-proxy-stand-in {\n chain prerouting {\n  type nat hook prerouting priority dstnat; policy accept;\n")
	for _, p := range []struct {
		proto      string
		port, node int
	}{{"tcp", 80, labTCPNodePort}, {"tcp", 83, labTCPNodePort}, {"tcp", 84, labTCPNodePort}, {"udp", 53, labUDPNodePort}} {
		fmt.Fprintf(&b, "  ip daddr %s %s dport %d dnat ip to %s:%d\n", vip4, p.proto, p.port, h.Addr4, p.node)
		fmt.Fprintf(&b, "  ip6 daddr %s %s dport %d dnat ip6 to [%s]:%d\n", vip6, p.proto, p.port, h.Addr6, p.node)
	}
	b.WriteString(" }\n}\n")
	cmd := h.Command(t.Context(), "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(b.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kube-proxy stand-in in %s: %v: %s", h.Name, err, out)
	}
}

// wantNode is the node Assign and the kernel's jhash give a flow of
// lab/web (src:sport) with the given backends.
func wantNode(backends []Backend, src netip.Addr, sport uint16) string {
	var fam []Backend
	for _, b := range backends {
		if firstAddr(familyOfAddr(src), b).IsValid() {
			fam = append(fam, b)
		}
	}
	return Assign("lab/web", fam)[jhashBucket(src, sport, true, netip.Addr{}, 0, HashSeed, BucketCount)]
}

func familyOfAddr(a netip.Addr) family {
	if a.Is6() {
		return ipv6
	}
	return ipv4
}

func TestKernelPassthrough(t *testing.T) {
	l := netlab.NewT(t, netlab.Options{Subnet6: labSubnet6}) // skips with -short or without root
	client := l.AddHostT(t, "client", netlab.HostOptions{Addr4: labClient, Addr6: labClient6})
	addAddr(t, client, netip.PrefixFrom(labClientBad, 24))
	addAddr(t, client, netip.PrefixFrom(labClientBad6, 64))
	lb := l.AddHostT(t, "lb", netlab.HostOptions{Addr4: labLB, Addr6: labLB6, Sysctls: map[string]string{
		"net.ipv4.conf.all.send_redirects":  "0",
		"net.ipv4.conf.eth0.send_redirects": "0",
	}})
	addAddr(t, lb, netip.PrefixFrom(labVIP, 32))
	// As the agent adds it: deprecated, so never a source address.
	runIn(t, lb, "ip", "addr", "add", netip.PrefixFrom(labVIP6, 128).String(), "dev", lb.Iface, "nodad", "preferred_lft", "0")
	serve(t, lb, labTCPNodePort, labUDPNodePort)
	for _, node := range []string{"node-a", "node-b"} {
		ips := labNodes[node]
		h := l.AddHostT(t, node, netlab.HostOptions{Addr4: netip.MustParseAddr(ips[0]), Addr6: netip.MustParseAddr(ips[1])})
		serve(t, h, labTCPNodePort, labUDPNodePort)
		kubeProxyStandIn(t, h, labVIP, labVIP6)
	}
	// Counters on the lb host's link, before our chain: what reaches the
	// host for the VIPs and what comes back from them.
	runInWithStdin(t, lb, `table netdev count {
 chain in {
  type filter hook ingress device "eth0" priority -1000; policy accept;
  ip daddr `+labVIP.String()+` counter
  ip6 daddr `+labVIP6.String()+` counter
  ip saddr `+labVIP.String()+` counter
  ip6 saddr `+labVIP6.String()+` counter
 }
}
`, "nft", "-f", "-")

	var syncer *Syncer
	if err := lb.Do(func() error {
		var nfts [3]knftables.Interface
		for i, f := range families {
			var err error
			if nfts[i], err = NewNFTables(f); err != nil {
				return err
			}
		}
		syncer = NewSyncer(nfts[0], nfts[1], nfts[2], NetlinkConntrack{}).BatchBucketElements()
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
	backends := []Backend{ptBackend("node-a", true), ptBackend("node-b", true)}
	sync(ptState("", backends...))

	// check sends n TCP connections and n UDP flows per family to port 80/53
	// of lab/web and checks each reached the node Assign gives it and saw
	// the client's own address; it returns the connections per node.
	check := func(t *testing.T, backends []Backend, sport uint16, n int) map[string]int {
		t.Helper()
		seen := map[string]int{}
		for _, c := range []struct{ src, vip netip.Addr }{{labClient, labVIP}, {labClient6, labVIP6}} {
			for p := sport; p < sport+uint16(n); p++ {
				src := netip.AddrPortFrom(c.src, p)
				r, err := dialTCP(client, src, netip.AddrPortFrom(c.vip, 80), 3*time.Second)
				if err != nil {
					t.Fatalf("TCP %s -> %s:80: %v", src, c.vip, err)
				}
				u := newUDPClient(t, client, src, netip.AddrPortFrom(c.vip, 53))
				ru, err := u.ask(time.Second)
				if err != nil {
					t.Fatalf("UDP %s -> %s:53: %v", src, c.vip, err)
				}
				want := wantNode(backends, c.src, p)
				for _, got := range []reply{r, ru} {
					if got.node != want {
						t.Errorf("%s -> %s reached %s, Assign gives %s", src, c.vip, got.node, want)
					}
					if got.peer != c.src {
						t.Errorf("%s saw the client as %s, want %s", got.node, got.peer, c.src)
					}
				}
				seen[r.node]++
			}
		}
		return seen
	}

	t.Run("TCP and UDP reach the nodes of their buckets with the client's address", func(t *testing.T) {
		before := counters(t, lb)
		seen := check(t, backends, 41000, 24)
		if len(seen) != 2 {
			t.Errorf("flows did not spread over both nodes: %v", seen)
		}
		after := counters(t, lb)
		for i, what := range []string{"to " + labVIP.String(), "to " + labVIP6.String()} {
			if after[i] == before[i] {
				t.Errorf("no packet %s reached the lb host", what)
			}
		}
		for i, what := range []string{"from " + labVIP.String(), "from " + labVIP6.String()} {
			if n := after[i+2] - before[i+2]; n != 0 {
				t.Errorf("%d reply packets %s crossed the lb host; replies must go straight to the client", n, what)
			}
		}
		t.Logf("lb host packets to the VIPs %d, %d; from them %d, %d", after[0]-before[0], after[1]-before[1], after[2]-before[2], after[3]-before[3])
	})

	t.Run("a frame for another link-layer address is not forwarded", func(t *testing.T) {
		// The client sends to a MAC address no host has: the bridge floods
		// such frames to every port, as a switch does with an unknown
		// destination. The lb host sees them but must not forward them:
		// only the holder of the address (whose MAC the client learnt)
		// forwards, or every other host would send a copy.
		const nobody = "02:00:5e:00:53:99"
		for _, vip := range []netip.Addr{labVIP, labVIP6} {
			runIn(t, client, "ip", "neigh", "replace", vip.String(), "lladdr", nobody, "dev", client.Iface, "nud", "permanent")
			t.Cleanup(func() {
				_ = client.Command(context.Background(), "ip", "neigh", "del", vip.String(), "dev", client.Iface).Run()
			})
		}
		before := counters(t, lb)
		for _, c := range []struct{ src, vip netip.Addr }{{labClient, labVIP}, {labClient6, labVIP6}} {
			r, err := dialTCP(client, netip.AddrPortFrom(c.src, 44000), netip.AddrPortFrom(c.vip, 80), time.Second)
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				t.Errorf("TCP %s -> %s:80 through a frame for %s: got %+v, %v; want a timeout (not forwarded)", c.src, c.vip, nobody, r, err)
			}
		}
		after := counters(t, lb)
		for i, what := range []string{"to " + labVIP.String(), "to " + labVIP6.String()} {
			if after[i] == before[i] {
				t.Errorf("no flooded frame %s reached the lb host: the check proves nothing", what)
			}
		}
		for _, vip := range []netip.Addr{labVIP, labVIP6} {
			runIn(t, client, "ip", "neigh", "del", vip.String(), "dev", client.Iface)
		}
	})

	t.Run("the lb host keeps no conntrack entry for forwarded flows", func(t *testing.T) {
		for _, fam := range []netlink.InetFamily{unix.AF_INET, unix.AF_INET6} {
			var flows []*netlink.ConntrackFlow
			if err := lb.Do(func() error {
				var err error
				flows, err = netlink.ConntrackTableList(netlink.ConntrackTable, fam)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			for _, f := range flows {
				t.Errorf("conntrack entry on the lb host: %s", f)
			}
		}
	})

	t.Run("a source outside the ranges is dropped", func(t *testing.T) {
		for _, c := range []struct{ src, vip netip.Addr }{{labClientBad, labVIP}, {labClientBad6, labVIP6}} {
			_, err := dialTCP(client, netip.AddrPortFrom(c.src, 0), netip.AddrPortFrom(c.vip, 84), time.Second)
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				t.Errorf("%s -> %s:84: got %v, want a timeout (dropped)", c.src, c.vip, err)
			}
		}
		for _, c := range []struct{ src, vip netip.Addr }{{labClient, labVIP}, {labClient6, labVIP6}} {
			if _, err := dialTCP(client, netip.AddrPortFrom(c.src, 0), netip.AddrPortFrom(c.vip, 84), 3*time.Second); err != nil {
				t.Errorf("%s -> %s:84 (allowed): %v", c.src, c.vip, err)
			}
		}
	})

	t.Run("ClientIP affinity keeps a client on the node of its address's bucket", func(t *testing.T) {
		for _, src := range []netip.Addr{labClient, labClient6} {
			vip := labVIP
			if src.Is6() {
				vip = labVIP6
			}
			var fam []Backend
			for _, b := range backends {
				if firstAddr(familyOfAddr(src), b).IsValid() {
					fam = append(fam, b)
				}
			}
			want := Assign("lab/sticky", fam)[jhashBucket(src, 0, false, netip.Addr{}, 0, HashSeed, BucketCount)]
			for sport := uint16(41500); sport < 41510; sport++ {
				r, err := dialTCP(client, netip.AddrPortFrom(src, sport), netip.AddrPortFrom(vip, 83), 3*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				if r.node != want {
					t.Errorf("%s port %d reached %s, want %s", src, sport, r.node, want)
				}
			}
		}
	})

	t.Run("no healthy node: TCP reset from the lb host", func(t *testing.T) {
		for _, c := range []struct{ src, vip netip.Addr }{{labClient, labVIP}, {labClient6, labVIP6}} {
			_, err := dialTCP(client, netip.AddrPortFrom(c.src, 0), netip.AddrPortFrom(c.vip, 81), 3*time.Second)
			if !errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("TCP to %s:81: got %v, want connection refused", c.vip, err)
			}
		}
	})

	t.Run("an unhealthy node gets no flows", func(t *testing.T) {
		down := []Backend{ptBackend("node-a", true), ptBackend("node-b", false)}
		sync(ptState("", down...))
		if seen := check(t, down, 42000, 16); seen["node-b"] != 0 {
			t.Errorf("unhealthy node-b got flows: %v", seen)
		}
	})

	t.Run("a node off the link gets no flows", func(t *testing.T) {
		st := ptState("", backends...)
		st.Links = []netip.Prefix{netip.PrefixFrom(labLB, 32), netip.MustParsePrefix("192.0.2.11/32"), netip.PrefixFrom(labLB6, 128), netip.MustParsePrefix("2001:db8::11/128")}
		sync(st)
		offLink := []Backend{ptBackend("node-a", true), ptBackend("node-b", false)}
		if seen := check(t, offLink, 42100, 16); seen["node-b"] != 0 {
			t.Errorf("off-link node-b got flows: %v", seen)
		}
	})

	t.Run("the lb host's own node serves its buckets itself", func(t *testing.T) {
		kubeProxyStandIn(t, lb, labVIP, labVIP6)
		self := []Backend{ptBackend("lb", true), ptBackend("node-a", true), ptBackend("node-b", true)}
		sync(ptState("lb", self...))
		seen := check(t, self, 43000, 32)
		if len(seen) != 3 {
			t.Errorf("flows did not spread over the lb host's node and the two others: %v", seen)
		}
		t.Logf("connections per node: %v", seen)
	})

	t.Run("Cleanup removes our tables", func(t *testing.T) {
		if err := lb.Do(func() error { return syncer.Cleanup(context.Background()) }); err != nil {
			t.Fatal(err)
		}
		if out := nft(t, lb, "list", "tables"); strings.Contains(out, TableName) {
			t.Errorf("tables left after Cleanup:\n%s", out)
		}
	})
}

// counters reads the packet counters of the netdev count table in h, in
// order.
func counters(t *testing.T, h *netlab.Host) []int {
	t.Helper()
	return tableCounters(t, h, "netdev count", 4)
}

// tableCounters reads the want packet counters of table ("<family>
// <name>") in h, in order.
func tableCounters(t *testing.T, h *netlab.Host, table string, want int) []int {
	t.Helper()
	var out []int
	args := append([]string{"list", "table"}, strings.Fields(table)...)
	for _, m := range regexp.MustCompile(`counter packets (\d+)`).FindAllStringSubmatch(nft(t, h, args...), -1) {
		n, _ := strconv.Atoi(m[1])
		out = append(out, n)
	}
	if len(out) != want {
		t.Fatalf("counters of %s in %s: got %d, want %d", table, h.Name, len(out), want)
	}
	return out
}

// runInWithStdin runs a command in h's namespace with stdin.
func runInWithStdin(t *testing.T, h *netlab.Host, stdin string, name string, args ...string) {
	t.Helper()
	cmd := h.Command(t.Context(), name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s in %s: %v: %s", name, strings.Join(args, " "), h.Name, err, out)
	}
}

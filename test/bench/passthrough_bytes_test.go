package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"sigs.k8s.io/knftables"

	"github.com/groundcloud/groundcloud/internal/dataplane"
	"github.com/groundcloud/groundcloud/internal/lab"
)

// The passthrough bytes benchmark: a client fetches 1 MiB responses from
// two nodes through one load-balancer host running the real data plane,
// once in proxy forwarding and once in passthrough forwarding (the nodes
// DNAT the VIP themselves, standing in for kube-proxy with ipMode VIP),
// and the load-balancer host's link counts the bytes it carried.
const (
	ptResponse  = 1 << 20
	ptRequests  = 40
	ptNodePort  = 30080
	ptProxyPort = 80
	ptPassPort  = 81
)

var (
	ptVIP   = netip.MustParseAddr("192.0.2.100")
	ptNodes = []string{"node-a", "node-b"}
)

// ptResult is what one mode moved: bytes of responses the client read and
// bytes the load-balancer host's link received and sent meanwhile.
type ptResult struct {
	mode           string
	responseBytes  int64
	lbRx, lbTx     uint64
	lbRxPk, lbTxPk uint64
}

func (r ptResult) lbBytes() uint64 { return r.lbRx + r.lbTx }

func TestPassthroughBytes(t *testing.T) {
	skipUnlessBench(t)
	l := lab.NewT(t, lab.Options{})
	client := l.AddHostT(t, "client", lab.HostOptions{})
	lb := l.AddHostT(t, "lb", lab.HostOptions{Forwarding: true, Sysctls: map[string]string{
		"net.ipv4.conf.all.send_redirects":  "0",
		"net.ipv4.conf.eth0.send_redirects": "0",
	}})
	must(t, lb.AddAddress(lb.Iface, netip.PrefixFrom(ptVIP, 32)))
	var backends []dataplane.Backend
	for _, name := range ptNodes {
		h := l.AddHostT(t, name, lab.HostOptions{})
		serveBytes(t, h)
		standIn(t, h)
		backends = append(backends, dataplane.Backend{Node: name, Addrs: []netip.Addr{h.Addr4}, Healthy: true})
	}
	var syncer *dataplane.Syncer
	must(t, lb.Do(func() error {
		ip4, err := dataplane.NewNFTables(knftables.IPv4Family)
		if err != nil {
			return err
		}
		nd, err := dataplane.NewNFTables(knftables.NetDevFamily)
		if err != nil {
			return err
		}
		syncer = dataplane.NewSyncer(ip4, nil, nd, nil)
		return nil
	}))
	st := dataplane.State{Interface: lb.Iface, Links: []netip.Prefix{lb.Prefix4()}, Services: []dataplane.Service{
		{Name: "bench/proxy", VIPs: []netip.Addr{ptVIP}, Backends: backends,
			Ports: []dataplane.Port{{Protocol: dataplane.TCP, Port: ptProxyPort, NodePort: ptNodePort}}},
		{Name: "bench/passthrough", VIPs: []netip.Addr{ptVIP}, Backends: backends, Forwarding: dataplane.Passthrough,
			Ports: []dataplane.Port{{Protocol: dataplane.TCP, Port: ptPassPort, NodePort: ptNodePort}}},
	}}
	must(t, lb.Do(func() error {
		_, err := syncer.Sync(context.Background(), st)
		return err
	}))
	t.Cleanup(func() { _ = lb.Do(func() error { return syncer.Cleanup(context.Background()) }) })

	var results []ptResult
	for _, m := range []struct {
		mode string
		port uint16
	}{{"proxy", ptProxyPort}, {"passthrough", ptPassPort}} {
		r, err := fetchAll(t, client, lb, m.port)
		if err != nil {
			t.Fatalf("%s: %v", m.mode, err)
		}
		r.mode = m.mode
		results = append(results, r)
		fmt.Printf("BENCH passthrough-bytes mode=%s responses=%d response_bytes=%d lb_rx_bytes=%d lb_tx_bytes=%d lb_rx_packets=%d lb_tx_packets=%d\n",
			r.mode, ptRequests, r.responseBytes, r.lbRx, r.lbTx, r.lbRxPk, r.lbTxPk)
	}
	section := passthroughSection(results)
	t.Log("\n" + section)
	must(t, writeSection("../../docs/benchmarks.md", "## Passthrough: bytes through the load-balancer host", section))
}

// fetchAll makes ptRequests connections to VIP:port, reads each 1 MiB
// response, and returns the bytes read with what the lb host's link
// carried meanwhile.
func fetchAll(t *testing.T, client, lb *lab.Host, port uint16) (ptResult, error) {
	before, err := linkStats(lb)
	if err != nil {
		return ptResult{}, err
	}
	var total int64
	for i := range ptRequests {
		n, err := fetchBytes(client, netip.AddrPortFrom(ptVIP, port))
		if err != nil {
			return ptResult{}, fmt.Errorf("request %d: %w", i, err)
		}
		if n != ptResponse {
			return ptResult{}, fmt.Errorf("request %d: read %d bytes, want %d", i, n, ptResponse)
		}
		total += n
	}
	after, err := linkStats(lb)
	if err != nil {
		return ptResult{}, err
	}
	return ptResult{responseBytes: total,
		lbRx: after.RxBytes - before.RxBytes, lbTx: after.TxBytes - before.TxBytes,
		lbRxPk: after.RxPackets - before.RxPackets, lbTxPk: after.TxPackets - before.TxPackets}, nil
}

func fetchBytes(h *lab.Host, addr netip.AddrPort) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := h.DialTCP(ctx, addr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := conn.Write([]byte("GET\n")); err != nil {
		return 0, err
	}
	return io.Copy(io.Discard, conn)
}

func linkStats(h *lab.Host) (*netlink.LinkStatistics, error) {
	var st *netlink.LinkStatistics
	err := h.Do(func() error {
		link, err := netlink.LinkByName(h.Iface)
		if err != nil {
			return err
		}
		st = link.Attrs().Statistics
		if st == nil {
			return errors.New("no link statistics")
		}
		return nil
	})
	return st, err
}

// serveBytes answers every connection on ptNodePort with ptResponse bytes
// once it has read a line.
func serveBytes(t *testing.T, h *lab.Host) {
	t.Helper()
	var ln net.Listener
	must(t, h.Do(func() error {
		var err error
		ln, err = net.Listen("tcp4", fmt.Sprintf(":%d", ptNodePort))
		return err
	}))
	t.Cleanup(func() { ln.Close() })
	body := make([]byte, ptResponse)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 64)
				if _, err := c.Read(buf); err != nil {
					return
				}
				_, _ = c.Write(body)
			}()
		}
	}()
}

// standIn DNATs VIP:ptPassPort to the node's own NodePort, as kube-proxy
// does for a Service with ipMode VIP.
func standIn(t *testing.T, h *lab.Host) {
	t.Helper()
	rules := fmt.Sprintf("table ip kube-proxy-stand-in {\n chain prerouting {\n  type nat hook prerouting priority dstnat; policy accept;\n"+
		"  ip daddr %s tcp dport %d dnat ip to %s:%d\n }\n}\n", ptVIP, ptPassPort, h.Addr4, ptNodePort)
	cmd := h.Command(t.Context(), "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("stand-in in %s: %v: %s", h.Name, err, out)
	}
}

func passthroughSection(results []ptResult) string {
	var b strings.Builder
	b.WriteString("## Passthrough: bytes through the load-balancer host\n\n")
	fmt.Fprintf(&b, "`TestPassthroughBytes`: a client fetches %d responses of 1 MiB, one connection each, from two nodes "+
		"through one load-balancer host running the real data plane (internal/lab namespaces on one bridge; the nodes "+
		"DNAT the VIP themselves in passthrough, as kube-proxy does for ipMode VIP). Bytes and packets are the "+
		"load-balancer host's link counters over the whole run.\n\n", ptRequests)
	b.WriteString("| forwarding | response bytes | LB host rx bytes | LB host tx bytes | LB host bytes / response bytes |\n|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %.3f |\n", r.mode, r.responseBytes, r.lbRx, r.lbTx, float64(r.lbBytes())/float64(r.responseBytes))
	}
	if len(results) == 2 && results[0].lbBytes() > 0 {
		fmt.Fprintf(&b, "\nPassthrough carried %.1f%% of the bytes proxy forwarding carried on the load-balancer host.\n",
			100*float64(results[1].lbBytes())/float64(results[0].lbBytes()))
	}
	return b.String()
}

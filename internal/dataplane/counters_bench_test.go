package dataplane

import (
	"context"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/knftables"

	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

// BenchmarkKernelTrafficCounters measures what the traffic counters cost
// a forwarded request: a client in one namespace sends small requests
// through the VIP (proxy forwarding: DNAT, SNAT, conntrack) to an echo
// server on a node, over 8 keep-alive TCP connections and 8 UDP flows, with
// the counters off, per address and per node. One op is one request and
// its answer (two packets through the load-balancer host each way's
// rules); it measures each mode benchRounds times, in rotating order:
// compare the medians of req/s. docs/benchmarks.md ("Traffic counters")
// has the figures.
func BenchmarkKernelTrafficCounters(b *testing.B) {
	client, sync := countersLab(b)
	// Rounds in a rotating order, so that the machine's drift (it is
	// shared) spreads over the modes rather than favouring one.
	for round := range benchRounds {
		for i := range countingModes {
			c := countingModes[(i+round)%len(countingModes)]
			sync(c.counting)
			for _, proto := range []string{"tcp", "udp"} {
				b.Run(proto+"/"+c.name, func(b *testing.B) {
					benchmarkRequests(b, client, proto, countersTarget(proto), 8)
				})
			}
		}
	}
}

// countersTarget is the lab's VIP and port for proto ("tcp" or "udp").
func countersTarget(proto string) netip.AddrPort {
	if proto == "udp" {
		return netip.AddrPortFrom(labVIP, 53)
	}
	return netip.AddrPortFrom(labVIP, 80)
}

// countingModes are the settings of --traffic-counters the counters'
// benchmarks compare.
var countingModes = []struct {
	name     string
	counting Counting
}{{"counters=none", Counting{}}, {"counters=address", Counting{Frontends: true}}, {"counters=node", countAll}}

// countersLab builds the counters' benchmarks' lab: a client, a
// load-balancer host in proxy forwarding and a node with echo servers,
// each in its own namespace; sync programs the load-balancer host with a
// counting mode. It skips without root or nft, and warms the path up.
func countersLab(tb testing.TB) (client *netlab.Host, sync func(Counting)) {
	tb.Helper()
	if _, err := exec.LookPath("nft"); err != nil {
		tb.Skip("kernel benchmark: no nft binary")
	}
	l := netlab.NewT(tb, netlab.Options{Subnet6: labSubnet6}) // skips without root
	client = l.AddHostT(tb, "client", netlab.HostOptions{Addr4: labClient, Addr6: labClient6})
	lb := l.AddHostT(tb, "lb", netlab.HostOptions{Addr4: labLB, Addr6: labLB6, Forwarding: true, Sysctls: map[string]string{
		"net.ipv4.conf.all.send_redirects":  "0",
		"net.ipv4.conf.eth0.send_redirects": "0",
	}})
	if out, err := lb.Command(tb.Context(), "ip", "addr", "add", labVIP.String()+"/32", "dev", lb.Iface).CombinedOutput(); err != nil {
		tb.Fatalf("VIP: %v: %s", err, out)
	}
	ips := labNodes["node-a"]
	node := l.AddHostT(tb, "node-a", netlab.HostOptions{Addr4: netip.MustParseAddr(ips[0]), Addr6: netip.MustParseAddr(ips[1])})
	echoServers(tb, node, labTCPNodePort, labUDPNodePort)
	st := State{Services: []Service{newService("lab/bench", withVIPs(labVIP.String()),
		withPort(TCP, 80, labTCPNodePort), withPort(UDP, 53, labUDPNodePort),
		withBackend("node-a", true, ips...), withBackend("node-b", false, labNodes["node-b"]...))}}
	sync = func(c Counting) {
		if err := lb.Do(func() error {
			nft4, err := NewNFTables(knftables.IPv4Family)
			if err != nil {
				return err
			}
			_, err = NewSyncer(nft4, nil, nil, nil).BatchBucketElements().CountTraffic(c).Sync(context.Background(), st)
			return err
		}); err != nil {
			tb.Fatalf("sync: %v", err)
		}
	}
	// Warm up (neighbours, caches) before the first measured run.
	sync(Counting{})
	for _, proto := range []string{"tcp", "udp"} {
		if err := exchange(dialFlows(tb, client, proto, countersTarget(proto), 8), 20000); err != nil {
			tb.Fatalf("warm-up: %v", err)
		}
	}
	return client, sync
}

// benchRounds is how often BenchmarkKernelTrafficCounters measures each
// mode.
const benchRounds = 5

// benchmarkRequests runs b.N request/answer pairs of 64 bytes over flows
// connections (TCP) or sockets (UDP) to dst from h and reports req/s.
func benchmarkRequests(b *testing.B, h *netlab.Host, proto string, dst netip.AddrPort, flows int) {
	conns := dialFlows(b, h, proto, dst, flows)
	b.ResetTimer()
	start := time.Now()
	err := exchange(conns, b.N)
	b.StopTimer()
	if err != nil {
		b.Fatalf("requests: %v", err)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
}

// dialFlows opens n connections (TCP) or connected sockets (UDP) from h to
// dst, closed when the benchmark ends.
func dialFlows(tb testing.TB, h *netlab.Host, proto string, dst netip.AddrPort, n int) []net.Conn {
	conns := make([]net.Conn, n)
	for i := range conns {
		if err := h.Do(func() error {
			var err error
			conns[i], err = net.DialTimeout(proto, dst.String(), 5*time.Second)
			return err
		}); err != nil {
			tb.Fatalf("%s to %s: %v", proto, dst, err)
		}
		tb.Cleanup(func() { conns[i].Close() })
	}
	return conns
}

// exchange sends n requests of 64 bytes spread over conns, each waiting
// for its echo.
func exchange(conns []net.Conn, n int) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(conns))
	msg := make([]byte, 64)
	for i, c := range conns {
		k := n / len(conns)
		if i < n%len(conns) {
			k++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 64)
			for range k {
				if err := echoOnce(c, msg, buf); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// echoOnce sends msg on c and reads its echo into buf.
func echoOnce(c net.Conn, msg, buf []byte) error {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(msg); err != nil {
		return err
	}
	_, err := io.ReadFull(c, buf)
	return err
}

// echoServers echo every TCP stream and UDP datagram on the ports of h.
func echoServers(tb testing.TB, h *netlab.Host, tcpPort, udpPort int) {
	tb.Helper()
	ln, pc := listenBoth(tb, h, tcpPort, udpPort)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(buf[:n], from)
		}
	}()
}

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
	if _, err := exec.LookPath("nft"); err != nil {
		b.Skip("kernel benchmark: no nft binary")
	}
	l := netlab.NewT(b, netlab.Options{Subnet6: labSubnet6}) // skips without root
	client := l.AddHostT(b, "client", netlab.HostOptions{Addr4: labClient, Addr6: labClient6})
	lb := l.AddHostT(b, "lb", netlab.HostOptions{Addr4: labLB, Addr6: labLB6, Forwarding: true, Sysctls: map[string]string{
		"net.ipv4.conf.all.send_redirects":  "0",
		"net.ipv4.conf.eth0.send_redirects": "0",
	}})
	if out, err := lb.Command(b.Context(), "ip", "addr", "add", labVIP.String()+"/32", "dev", lb.Iface).CombinedOutput(); err != nil {
		b.Fatalf("VIP: %v: %s", err, out)
	}
	ips := labNodes["node-a"]
	node := l.AddHostT(b, "node-a", netlab.HostOptions{Addr4: netip.MustParseAddr(ips[0]), Addr6: netip.MustParseAddr(ips[1])})
	echoServers(b, node, labTCPNodePort, labUDPNodePort)
	st := State{Services: []Service{newService("lab/bench", withVIPs(labVIP.String()),
		withPort(TCP, 80, labTCPNodePort), withPort(UDP, 53, labUDPNodePort),
		withBackend("node-a", true, ips...), withBackend("node-b", false, labNodes["node-b"]...))}}

	modes := []struct {
		name     string
		counting Counting
	}{{"counters=none", Counting{}}, {"counters=address", Counting{Frontends: true}}, {"counters=node", countAll}}
	sync := func(c Counting) {
		if err := lb.Do(func() error {
			nft4, err := NewNFTables(knftables.IPv4Family)
			if err != nil {
				return err
			}
			_, err = NewSyncer(nft4, nil, nil, nil).BatchBucketElements().CountTraffic(c).Sync(context.Background(), st)
			return err
		}); err != nil {
			b.Fatalf("sync: %v", err)
		}
	}
	// Warm up (neighbours, caches) before the first measured run.
	sync(Counting{})
	for _, dst := range []netip.AddrPort{netip.AddrPortFrom(labVIP, 80), netip.AddrPortFrom(labVIP, 53)} {
		proto := map[uint16]string{80: "tcp", 53: "udp"}[dst.Port()]
		if err := exchange(dialFlows(b, client, proto, dst, 8), 20000); err != nil {
			b.Fatalf("warm-up: %v", err)
		}
	}
	// Rounds in a rotating order, so that the machine's drift (it is
	// shared) spreads over the modes rather than favouring one.
	for round := range benchRounds {
		for i := range modes {
			c := modes[(i+round)%len(modes)]
			sync(c.counting)
			for _, proto := range []string{"tcp", "udp"} {
				b.Run(proto+"/"+c.name, func(b *testing.B) {
					port := 80
					if proto == "udp" {
						port = 53
					}
					benchmarkRequests(b, client, proto, netip.AddrPortFrom(labVIP, uint16(port)), 8)
				})
			}
		}
	}
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
func dialFlows(b *testing.B, h *netlab.Host, proto string, dst netip.AddrPort, n int) []net.Conn {
	conns := make([]net.Conn, n)
	for i := range conns {
		if err := h.Do(func() error {
			var err error
			conns[i], err = net.DialTimeout(proto, dst.String(), 5*time.Second)
			return err
		}); err != nil {
			b.Fatalf("%s to %s: %v", proto, dst, err)
		}
		b.Cleanup(func() { conns[i].Close() })
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
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				if _, err := c.Write(msg); err != nil {
					errs <- err
					return
				}
				if _, err := io.ReadFull(c, buf); err != nil {
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

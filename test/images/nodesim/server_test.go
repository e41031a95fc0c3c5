package nodesim

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

// TestServerInNamespace runs a Server in-process, its sockets opened inside
// a lab host, and talks to it from another host.
func TestServerInNamespace(t *testing.T) {
	l := netlab.NewT(t, netlab.Options{})
	node := l.AddHostT(t, "node1", netlab.HostOptions{})
	client := l.AddHostT(t, "client", netlab.HostOptions{})

	var s *Server
	err := node.Do(func() (err error) {
		s, err = Listen(Config{Name: "node1", TCPPorts: []uint16{30080, 30081}, UDPPorts: []uint16{30053}, HTTPPorts: []uint16{30090}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- s.Run(ctx) }()
	t.Cleanup(stop)

	var open []net.Conn
	for _, pair := range [][2]netip.Addr{{client.Addr4, node.Addr4}, {client.Addr6, node.Addr6}} {
		src, dst := pair[0], pair[1]
		for _, port := range []uint16{30080, 30081} {
			conn, r := dialNode(t, client, netip.AddrPortFrom(dst, port))
			open = append(open, conn)
			greeting := readLine(t, conn, r)
			if want := fmt.Sprintf("node1 %s", conn.LocalAddr()); greeting != want {
				t.Errorf("greeting from %s:%d = %q, want %q", dst, port, greeting, want)
			}
			if ap := netip.MustParseAddrPort(greeting[len("node1 "):]); ap.Addr() != src {
				t.Errorf("node saw client %s, want %s", ap.Addr(), src)
			}
			for i := range 3 {
				fmt.Fprintf(conn, "ping %d\n", i)
				if got, want := readLine(t, conn, r), fmt.Sprintf("node1 ping %d", i); got != want {
					t.Errorf("echo from %s:%d = %q, want %q", dst, port, got, want)
				}
			}
		}
		resp, err := client.HTTPClient().Get("http://" + netip.AddrPortFrom(dst, 30090).String() + "/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := "hello from node1 (you are " + netip.AddrPortFrom(src, 0).String(); !strings.HasPrefix(string(body), strings.TrimSuffix(want, "0")) {
			t.Errorf("http from %s = %q, want %q...", dst, body, want)
		}

		uctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		reply, err := client.UDPExchange(uctx, netip.AddrPortFrom(dst, 30053), []byte("hi"))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		// "node1 192.0.2.3:0" less its "0": the client's port is not known.
		want := strings.TrimSuffix("node1 "+netip.AddrPortFrom(src, 0).String(), "0")
		if got := string(reply); !strings.HasPrefix(got, want) {
			t.Errorf("udp reply from %s = %q, want %q<port>", dst, got, want)
		}
	}

	// A datagram to another address of the node (here on its loopback,
	// routed to it) is answered from that address, which is all a
	// connected client accepts.
	for _, extra := range []netip.Prefix{netip.MustParsePrefix("198.51.100.7/32"), netip.MustParsePrefix("2001:db8:ffff::7/128")} {
		via := node.Addr4
		if extra.Addr().Is6() {
			via = node.Addr6
		}
		for _, c := range []*exec.Cmd{
			node.Command(t.Context(), "ip", "addr", "add", extra.String(), "dev", "lo"),
			client.Command(t.Context(), "ip", "route", "add", extra.String(), "via", via.String()),
		} {
			if out, err := c.CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", c, err, out)
			}
		}
		uctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		reply, err := client.UDPExchange(uctx, netip.AddrPortFrom(extra.Addr(), 30053), []byte("hi"))
		cancel()
		if err != nil || !strings.HasPrefix(string(reply), "node1 ") {
			t.Errorf("udp to the node's loopback address %s: %q, %v", extra.Addr(), reply, err)
		}
	}

	stop()
	select {
	case err := <-ran:
		if err != nil {
			t.Errorf("Run = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	for _, conn := range open {
		_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := conn.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("open connection after Run: read %v, want EOF", err)
		}
		conn.Close()
	}
}

func dialNode(t *testing.T, from *netlab.Host, to netip.AddrPort) (net.Conn, *bufio.Reader) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	conn, err := from.DialTCP(ctx, to)
	if err != nil {
		t.Fatal(err)
	}
	return conn, bufio.NewReader(conn)
}

func readLine(t *testing.T, conn net.Conn, r *bufio.Reader) string {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("read from %s: %v", conn.RemoteAddr(), err)
	}
	return line[:len(line)-1]
}

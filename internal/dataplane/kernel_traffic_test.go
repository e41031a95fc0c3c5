package dataplane

// Traffic for the kernel test: servers on the nodes that say who they are and
// whom they saw, and clients that choose their source address and port, so
// that every flow is one the tracer can predict. Sockets are created inside
// the hosts' namespaces by netlab.Host.Do and stay there.

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

// serve starts a TCP server on tcpPort and a UDP server on udpPort in h, on
// IPv4 and IPv6. Both answer "<host> <client address>".
func serve(t *testing.T, h *netlab.Host, tcpPort, udpPort int) {
	t.Helper()
	var ln net.Listener
	var pc net.PacketConn
	err := h.Do(func() error {
		var err error
		if ln, err = net.Listen("tcp", fmt.Sprintf(":%d", tcpPort)); err != nil {
			return err
		}
		pc, err = net.ListenPacket("udp", fmt.Sprintf(":%d", udpPort))
		return err
	})
	if err != nil {
		t.Fatalf("servers in %s: %v", h.Name, err)
	}
	t.Cleanup(func() { ln.Close(); pc.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			peer := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
			fmt.Fprintf(c, "%s %s\n", h.Name, peer)
			c.Close()
		}
	}()
	go func() {
		buf := make([]byte, 512)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			peer := from.(*net.UDPAddr).AddrPort().Addr().Unmap()
			_, _ = pc.WriteTo([]byte(fmt.Sprintf("%s %s\n", h.Name, peer)), from)
		}
	}()
}

// holdServer accepts TCP connections on port in h (IPv4 and IPv6) and
// hands them to the test, which keeps them open.
func holdServer(t *testing.T, h *netlab.Host, port int, accepted chan<- net.Conn) {
	t.Helper()
	var ln net.Listener
	if err := h.Do(func() error {
		var err error
		ln, err = net.Listen("tcp", fmt.Sprintf(":%d", port))
		return err
	}); err != nil {
		t.Fatalf("server in %s: %v", h.Name, err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
}

// sendLine writes msg and a newline to from and reads the line at to.
func sendLine(from, to net.Conn, msg string) error {
	if _, err := from.Write([]byte(msg + "\n")); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	_ = to.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(to).ReadString('\n')
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if line != msg+"\n" {
		return fmt.Errorf("read %q, want %q", line, msg)
	}
	return nil
}

// datagram is one UDP datagram a node received.
type datagram struct {
	node string
	pc   net.PacketConn
	from net.Addr
	data string
}

// holdUDPServer receives UDP datagrams on port in h (IPv4 and IPv6) and
// hands them to the test, which may answer from the same socket later.
func holdUDPServer(t *testing.T, h *netlab.Host, port int, received chan<- datagram) {
	t.Helper()
	var pc net.PacketConn
	if err := h.Do(func() error {
		var err error
		pc, err = net.ListenPacket("udp", fmt.Sprintf(":%d", port))
		return err
	}); err != nil {
		t.Fatalf("UDP server in %s: %v", h.Name, err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			received <- datagram{node: h.Name, pc: pc, from: from, data: string(buf[:n])}
		}
	}()
}

// reply is what a node's server answered: its name and the client address it
// saw.
type reply struct {
	node string
	peer netip.Addr
}

func parseReply(s string) (reply, error) {
	node, peer, ok := strings.Cut(strings.TrimSpace(s), " ")
	a, err := netip.ParseAddr(peer)
	if !ok || err != nil {
		return reply{}, fmt.Errorf("bad reply %q", s)
	}
	return reply{node, a}, nil
}

// dialTCP connects from h's src:sport to dst and reads the reply.
func dialTCP(h *netlab.Host, src, dst netip.AddrPort, timeout time.Duration) (reply, error) {
	var r reply
	err := h.Do(func() error {
		d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(src), Timeout: timeout}
		c, err := d.Dial("tcp", dst.String())
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(timeout))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return err
		}
		r, err = parseReply(line)
		return err
	})
	return r, err
}

// udpClient is a connected UDP socket in a host's namespace: one flow.
type udpClient struct{ c *net.UDPConn }

// newUDPClient opens a flow from h's src to dst; it is closed when the test
// ends.
func newUDPClient(t *testing.T, h *netlab.Host, src, dst netip.AddrPort) *udpClient {
	t.Helper()
	var c *net.UDPConn
	err := h.Do(func() error {
		var err error
		c, err = net.DialUDP("udp", net.UDPAddrFromAddrPort(src), net.UDPAddrFromAddrPort(dst))
		return err
	})
	if err != nil {
		t.Fatalf("UDP socket %s -> %s in %s: %v", src, dst, h.Name, err)
	}
	t.Cleanup(func() { c.Close() })
	return &udpClient{c}
}

// ask sends a datagram and waits for the reply, retrying a few times (the
// first datagrams may race neighbour discovery).
func (u *udpClient) ask(timeout time.Duration) (reply, error) {
	buf := make([]byte, 512)
	var err error
	for range 3 {
		if _, err = u.c.Write([]byte("hello")); err != nil {
			return reply{}, err
		}
		_ = u.c.SetReadDeadline(time.Now().Add(timeout))
		var n int
		if n, err = u.c.Read(buf); err == nil {
			return parseReply(string(buf[:n]))
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			return reply{}, err
		}
	}
	return reply{}, err
}

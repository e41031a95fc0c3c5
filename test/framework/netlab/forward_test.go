package netlab

import (
	"bufio"
	"context"
	"net"
	"net/netip"
	"testing"
	"time"
)

func TestForwardLoopback(t *testing.T) {
	l := NewT(t, Options{})
	h := l.AddHostT(t, "inside", HostOptions{})

	// A server on the root namespace's loopback.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go answerLines(ln, "root says ")
	addr := netip.MustParseAddrPort(ln.Addr().String())

	// Not reachable inside the host before forwarding: its loopback is its own.
	if c, err := h.DialTCP(t.Context(), addr); err == nil {
		c.Close()
		t.Fatal("root loopback reachable inside the host without a forwarder")
	}

	f, err := h.ForwardLoopback(t.Context(), addr.String())
	if err != nil {
		t.Fatal(err)
	}
	c, err := h.DialTCP(t.Context(), addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("hi\n")); err != nil {
		t.Fatal(err)
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || got != "root says hi\n" {
		t.Fatalf("through the forwarder: %q, %v", got, err)
	}

	// Blocked: the relayed connection is cut, new ones get nothing; then
	// back.
	f.SetBlocked(true)
	if _, err := bufio.NewReader(c).ReadString('\n'); err == nil {
		t.Error("a relayed connection survived SetBlocked(true)")
	}
	c.Close()
	if got, err := exchange(h, addr); err == nil {
		t.Errorf("blocked forwarder relayed: %q", got)
	}
	f.SetBlocked(false)
	if got, err := exchange(h, addr); err != nil || got != "root says hi\n" {
		t.Errorf("after SetBlocked(false): %q, %v", got, err)
	}

	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if c, err := h.DialTCP(t.Context(), addr); err == nil {
		c.Close()
		t.Fatal("forwarder still accepts after Close")
	}
}

// exchange sends one line from h to addr and reads the answer.
func exchange(h *Host, addr netip.AddrPort) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := h.DialTCP(ctx, addr)
	if err != nil {
		return "", err
	}
	return askLine(c, "hi\n", 2*time.Second)
}

// answerLines answers each line of each connection ln accepts with
// prefix and the line, until ln is closed.
func answerLines(ln net.Listener, prefix string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			line, _ := bufio.NewReader(c).ReadString('\n')
			_, _ = c.Write([]byte(prefix + line))
		}()
	}
}

// askLine writes line on c, reads the answer within deadline, and closes c.
func askLine(c net.Conn, line string, deadline time.Duration) (string, error) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(deadline))
	if _, err := c.Write([]byte(line)); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

// TestForwardInto: a server inside a host, not reachable from the root
// namespace, answers through a Forwarder on the root namespace's loopback.
func TestForwardInto(t *testing.T) {
	l := NewT(t, Options{})
	h := l.AddHostT(t, "inside", HostOptions{})
	var ln net.Listener
	if err := h.Do(func() (err error) {
		ln, err = net.Listen("tcp", h.Addr4.String()+":8443")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go answerLines(ln, "inside says ")
	f, err := h.ForwardInto(t.Context(), netip.AddrPortFrom(h.Addr4, 8443))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ask := func(line string, deadline time.Duration) (string, error) {
		c, err := net.DialTimeout("tcp", f.Addr(), 5*time.Second)
		if err != nil {
			return "", err
		}
		return askLine(c, line, deadline)
	}
	if got, err := ask("hi\n", 5*time.Second); err != nil || got != "inside says hi\n" {
		t.Fatalf("through the forwarder: %q, %v", got, err)
	}

	// A slow server: the answer is held for the delay. The client gives
	// up before it (a deadline shorter than the delay), and gets it after.
	f.SetDelay(time.Second)
	if got, err := ask("slow\n", 200*time.Millisecond); err == nil {
		t.Errorf("an answer held for 1s came within 200ms: %q", got)
	}
	if got, err := ask("slow\n", 5*time.Second); err != nil || got != "inside says slow\n" {
		t.Errorf("after the delay: %q, %v", got, err)
	}
}

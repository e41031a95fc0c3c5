package dataplane

// A network-namespace lab for the kernel test: a bridge namespace and one
// namespace per host, each joined to the bridge by a veth pair. Only the
// namespaces created here are ever touched: links are created directly inside
// them, and nft, sockets and sysctls run on OS threads switched into them.

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netns"
)

// labPrefix starts the name of every namespace the lab creates, followed by
// the test process's pid: leftovers of a crashed run are recognised by a pid
// that no longer runs and deleted by the next run.
const labPrefix = "gcdp"

type lab struct {
	t  *testing.T
	id string
	ns map[string]netns.NsHandle
}

// newLab creates the namespaces bridge and each of hosts. They are deleted
// when the test ends, whatever the outcome.
func newLab(t *testing.T, hosts ...string) *lab {
	t.Helper()
	l := &lab{t: t, id: fmt.Sprintf("%s%d", labPrefix, os.Getpid()), ns: map[string]netns.NsHandle{}}
	deleteStaleLabs(t)
	t.Cleanup(l.destroy)
	for _, h := range append([]string{"br"}, hosts...) {
		l.ip("netns", "add", l.name(h))
		handle, err := netns.GetFromName(l.name(h))
		if err != nil {
			t.Fatalf("open namespace %s: %v", l.name(h), err)
		}
		l.ns[h] = handle
	}
	l.ip("-n", l.name("br"), "link", "add", "br0", "type", "bridge", "mcast_snooping", "0")
	l.ip("-n", l.name("br"), "link", "set", "br0", "up")
	for _, h := range hosts {
		l.ip("link", "add", "eth0", "netns", l.name(h), "type", "veth", "peer", "name", h, "netns", l.name("br"))
		l.ip("-n", l.name("br"), "link", "set", h, "master", "br0", "up")
		l.sysctl(h, "net/ipv6/conf/eth0/accept_dad", "0")
		l.ip("-n", l.name(h), "link", "set", "lo", "up")
		l.ip("-n", l.name(h), "link", "set", "eth0", "up")
	}
	return l
}

func (l *lab) name(host string) string { return l.id + "-" + host }

func (l *lab) destroy() {
	for h, handle := range l.ns {
		handle.Close()
		if out, err := exec.Command("ip", "netns", "del", l.name(h)).CombinedOutput(); err != nil {
			l.t.Errorf("delete namespace %s: %v: %s", l.name(h), err, out)
		}
	}
}

// deleteStaleLabs deletes namespaces of earlier runs whose process is gone.
// Namespaces of runs still going (another test binary) are left alone.
func deleteStaleLabs(t *testing.T) {
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		name := e.Name()
		id, _, ok := strings.Cut(strings.TrimPrefix(name, labPrefix), "-")
		pid, err := strconv.Atoi(id)
		if !strings.HasPrefix(name, labPrefix) || !ok || err != nil || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat(filepath.Join("/proc", id)); err == nil {
			continue
		}
		t.Logf("deleting namespace %s left by an earlier run", name)
		_ = exec.Command("ip", "netns", "del", name).Run()
	}
}

// ip runs the ip command (always with -n, or creating namespaces).
func (l *lab) ip(args ...string) {
	l.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		l.t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// addr adds an address to a host's eth0.
func (l *lab) addr(host string, prefix string) {
	l.t.Helper()
	args := []string{"-n", l.name(host), "addr", "add", prefix, "dev", "eth0"}
	if netip.MustParsePrefix(prefix).Addr().Is6() {
		args = append(args, "nodad")
	}
	l.ip(args...)
}

// do runs fn on an OS thread inside host's namespace. Sockets fn creates stay
// in that namespace; processes it starts (nft) run there too. The thread is
// never unlocked, so it ends with fn and never serves other goroutines.
func (l *lab) do(host string, fn func() error) error {
	handle, ok := l.ns[host]
	if !ok {
		return fmt.Errorf("no host %q", host)
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := netns.Set(handle); err != nil {
			errc <- fmt.Errorf("enter namespace of %s: %w", host, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

func (l *lab) sysctl(host, path, value string) {
	l.t.Helper()
	err := l.do(host, func() error { return os.WriteFile(filepath.Join("/proc/sys", path), []byte(value), 0o644) })
	if err != nil {
		l.t.Fatalf("sysctl %s=%s in %s: %v", path, value, host, err)
	}
}

// serve starts a TCP server on tcpPort and a UDP server on udpPort in host's
// namespace, on IPv4 and IPv6. Both answer "<host> <client address>".
func (l *lab) serve(host string, tcpPort, udpPort int) {
	l.t.Helper()
	var ln net.Listener
	var pc net.PacketConn
	err := l.do(host, func() error {
		var err error
		if ln, err = net.Listen("tcp", fmt.Sprintf(":%d", tcpPort)); err != nil {
			return err
		}
		pc, err = net.ListenPacket("udp", fmt.Sprintf(":%d", udpPort))
		return err
	})
	if err != nil {
		l.t.Fatalf("servers in %s: %v", host, err)
	}
	l.t.Cleanup(func() { ln.Close(); pc.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			peer := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
			fmt.Fprintf(c, "%s %s\n", host, peer)
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
			_, _ = pc.WriteTo([]byte(fmt.Sprintf("%s %s\n", host, peer)), from)
		}
	}()
}

// reply is what a lab server answered: its name and the client address it saw.
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

// dialTCP connects from host's src:sport to dst and reads the reply.
func (l *lab) dialTCP(host string, src netip.AddrPort, dst netip.AddrPort, timeout time.Duration) (reply, error) {
	var r reply
	err := l.do(host, func() error {
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

func (l *lab) udpClient(host string, src, dst netip.AddrPort) *udpClient {
	l.t.Helper()
	var c *net.UDPConn
	err := l.do(host, func() error {
		var err error
		c, err = net.DialUDP("udp", net.UDPAddrFromAddrPort(src), net.UDPAddrFromAddrPort(dst))
		return err
	})
	if err != nil {
		l.t.Fatalf("UDP socket %s -> %s: %v", src, dst, err)
	}
	l.t.Cleanup(func() { c.Close() })
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

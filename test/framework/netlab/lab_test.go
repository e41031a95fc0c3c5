package netlab

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"
)

const echoPort = 7000

func TestLab(t *testing.T) {
	rootBefore := rootNamespace(t)
	l := NewT(t, Options{})
	a := l.AddHostT(t, "a", HostOptions{})
	b := l.AddHostT(t, "b", HostOptions{Forwarding: true, Sysctls: map[string]string{"net.netfilter.nf_conntrack_tcp_loose": "0"}})
	c := l.AddHostT(t, "c", HostOptions{Addr4: netip.MustParseAddr("192.0.2.100")})
	for _, h := range []*Host{a, b, c} {
		serveEcho(t, h, echoPort)
	}

	t.Run("topology", func(t *testing.T) {
		if diff := cmp.Diff(rootBefore, rootNamespace(t)); diff != "" {
			t.Errorf("root namespace changed (-before +after):\n%s", diff)
		}
		want := []string{"a 192.0.2.2 2001:db8:0:1::2", "b 192.0.2.3 2001:db8:0:1::3", "c 192.0.2.100 2001:db8:0:1::4"}
		for i, h := range l.Hosts() {
			if got := fmt.Sprintf("%s %s %s", h.Name, h.Addr4, h.Addr6); got != want[i] {
				t.Errorf("host %d = %s, want %s", i, got, want[i])
			}
			if _, err := os.Stat(filepath.Join(netnsDir, l.Prefix+"-"+h.Name)); err != nil {
				t.Errorf("namespace of %s: %v", h.Name, err)
			}
		}
		for _, s := range []struct {
			h          *Host
			key, value string
		}{
			{a, "net/ipv4/ip_forward", "0"},
			{b, "net/ipv4/ip_forward", "1"},
			{b, "net/ipv6/conf/all/forwarding", "1"},
			{b, "net/netfilter/nf_conntrack_tcp_loose", "0"},
			{a, "net/ipv6/conf/eth0/accept_dad", "0"},
		} {
			if got := readSysctl(t, s.h, s.key); got != s.value {
				t.Errorf("%s in %s = %s, want %s", s.key, s.h.Name, got, s.value)
			}
		}
	})

	t.Run("add host errors", func(t *testing.T) {
		theirs := l.Prefix + "-taken"
		ipNetns(t, "add", theirs)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", theirs).Run() })
		for _, tt := range []struct {
			name string
			opts HostOptions
			want string
		}{
			{name: "a", want: "exists"},
			{name: "switch", want: "invalid name"},
			{name: "Upper", want: "invalid name"},
			{name: "x", opts: HostOptions{Addr4: a.Addr4}, want: "is taken"},
			{name: "x", opts: HostOptions{Addr6: netip.MustParseAddr("2001:db8:0:2::1")}, want: "not usable"},
			{name: "x", opts: HostOptions{Sysctls: map[string]string{"net.no.such": "1"}}, want: "sysctl net.no.such=1"},
			{name: "taken", want: "file exists"},
		} {
			if _, err := l.AddHost(t.Context(), tt.name, tt.opts); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("AddHost(%s, %+v) = %v, want error with %q", tt.name, tt.opts, err, tt.want)
			}
		}
		if got := namespacesWith(t, l.Prefix+"-x"); len(got) > 0 {
			t.Errorf("failed AddHost left %v", got)
		}
		if got := namespacesWith(t, theirs); len(got) != 1 {
			t.Errorf("failed AddHost deleted a namespace it did not create")
		}
		if got := len(l.Hosts()); got != 3 {
			t.Errorf("%d hosts after failures, want 3", got)
		}
	})

	t.Run("exchanges", func(t *testing.T) {
		for _, from := range []*Host{a, b, c} {
			for _, to := range []*Host{a, b, c} {
				if from == to {
					continue
				}
				for _, pair := range [][2]netip.Addr{{from.Addr4, to.Addr4}, {from.Addr6, to.Addr6}} {
					src, dst := pair[0], netip.AddrPortFrom(pair[1], echoPort)
					name := fmt.Sprintf("%s to %s", from.Name, dst)
					if got, err := tcpExchange(t.Context(), from, dst); err != nil || !strings.HasPrefix(got, to.Name+" "+addrPortPrefix(src)) {
						t.Errorf("tcp %s: %q, %v; want %q from %s", name, got, err, to.Name, src)
					}
					got, err := udpExchange(t.Context(), from, dst)
					if err != nil || !strings.HasPrefix(got, to.Name+" "+addrPortPrefix(src)) {
						t.Errorf("udp %s: %q, %v; want %q from %s", name, got, err, to.Name, src)
					}
				}
			}
		}
	})

	t.Run("threads are restored", func(t *testing.T) {
		root, err := os.Readlink("/proc/self/ns/net")
		if err != nil {
			t.Fatal(err)
		}
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range tasks {
			if ns, err := os.Readlink(filepath.Join("/proc/self/task", task.Name(), "ns/net")); err == nil && ns != root {
				t.Errorf("thread %s is in %s, not in %s", task.Name(), ns, root)
			}
		}
	})

	t.Run("set link", func(t *testing.T) {
		if err := b.SetLink(false); err != nil {
			t.Fatal(err)
		}
		for _, dst := range []netip.Addr{b.Addr4, b.Addr6} {
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			if got, err := tcpExchange(ctx, a, netip.AddrPortFrom(dst, echoPort)); err == nil {
				t.Errorf("tcp to %s with link down: got %q", dst, got)
			}
			cancel()
		}
		if err := b.SetLink(true); err != nil {
			t.Fatal(err)
		}
		for _, dst := range []netip.Addr{b.Addr4, b.Addr6} {
			if err := eventually(t.Context(), 5*time.Second, func(ctx context.Context) error {
				_, err := tcpExchange(ctx, a, netip.AddrPortFrom(dst, echoPort))
				return err
			}); err != nil {
				t.Errorf("tcp to %s after link up: %v", dst, err)
			}
		}
	})
}

func TestCloseStopsProcessesAndDeletesNamespaces(t *testing.T) {
	l := NewT(t, Options{})
	h := l.AddHostT(t, "node", HostOptions{})
	logPath := filepath.Join(t.TempDir(), "sh.log")
	// A child in the background shows that the whole group is stopped.
	p, err := h.Start(t.Context(), logPath, "sh", "-c", `sleep 300 & echo "child $!"; wait`)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := p.WaitForOutput(ctx, "child "); err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(p.Output(), "child ")))
	if err != nil {
		t.Fatalf("child pid in %q: %v", p.Output(), err)
	}

	// A process whose context ends is stopped on its own.
	short, cancelShort := context.WithCancel(t.Context())
	q, err := h.Start(short, "", "sleep", "300")
	if err != nil {
		t.Fatal(err)
	}
	cancelShort()
	select {
	case <-q.Done():
	case <-time.After(3 * time.Second):
		t.Errorf("process not stopped after its context ended")
	}

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	select {
	case <-p.Done():
	default:
		t.Fatal("process still running after Close")
	}
	var exit *exec.ExitError
	if err := p.Err(); !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Errorf("process ended with %v, want SIGTERM", err)
	}
	// Close has sent the group SIGKILL; a busy machine may take a moment
	// to schedule the child to die.
	for deadline := time.Now().Add(5 * time.Second); running(child) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if running(child) {
		t.Errorf("child %d of the process still runs 5 s after Close", child)
	}
	if left := namespacesWith(t, l.Prefix); len(left) > 0 {
		t.Errorf("namespaces left after Close: %v", left)
	}
	if out, err := exec.Command("ip", "netns", "list").CombinedOutput(); err != nil || strings.Contains(string(out), l.Prefix) {
		t.Errorf("ip netns list = %q, %v; want no %s", out, err, l.Prefix)
	}
	if _, err := l.AddHost(t.Context(), "late", HostOptions{}); !errors.Is(err, errClosed) {
		t.Errorf("AddHost after Close = %v, want %v", err, errClosed)
	}
}

func TestSweep(t *testing.T) {
	skipWithoutNamespaces(t)
	prefix := RunPrefix("gcsweep")
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := fmt.Sprintf("%s%dx0000-h", DefaultFamily, dead.Process.Pid)
	for _, name := range []string{prefix + "-left", prefix + "x-keep", stale, RunPrefix(DefaultFamily) + "-keep"} {
		ipNetns(t, "add", name)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	}
	sleeper := exec.Command("ip", "netns", "exec", prefix+"-left", "sleep", "300")
	sleeper.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleeper.Process.Kill() })
	waitInNamespace(t, prefix+"-left", sleeper.Process.Pid)

	if err := Sweep(prefix); err != nil {
		t.Fatal(err)
	}
	if err := sleeper.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("process in a swept namespace ended with %v, want killed", err)
	}
	if got := namespacesWith(t, prefix); strings.Join(got, " ") != prefix+"x-keep" {
		t.Errorf("after Sweep(%s): %v, want only %sx-keep", prefix, got, prefix)
	}

	if err := SweepStale(DefaultFamily); err != nil {
		t.Fatal(err)
	}
	if got := namespacesWith(t, stale); len(got) > 0 {
		t.Errorf("SweepStale left %v", got)
	}
	if got := namespacesWith(t, fmt.Sprintf("%s%dx", DefaultFamily, os.Getpid())); len(got) == 0 {
		t.Errorf("SweepStale deleted a namespace of this process")
	}
}

// serveEcho serves TCP and UDP on port in h, on both families. Each answers
// "<host> <client address>".
func serveEcho(t *testing.T, h *Host, port int) {
	t.Helper()
	var lns []net.Listener
	var pcs []net.PacketConn
	err := h.Do(func() error {
		for _, network := range []string{"4", "6"} {
			ln, err := net.Listen("tcp"+network, fmt.Sprintf(":%d", port))
			if err != nil {
				return err
			}
			lns = append(lns, ln)
			pc, err := net.ListenPacket("udp"+network, fmt.Sprintf(":%d", port))
			if err != nil {
				return err
			}
			pcs = append(pcs, pc)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("listen in %s: %v", h.Name, err)
	}
	for _, ln := range lns {
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				fmt.Fprintf(conn, "%s %s\n", h.Name, conn.RemoteAddr())
				conn.Close()
			}
		}()
	}
	for _, pc := range pcs {
		t.Cleanup(func() { pc.Close() })
		go func() {
			buf := make([]byte, 1500)
			for {
				_, addr, err := pc.ReadFrom(buf)
				if err != nil {
					return
				}
				_, _ = pc.WriteTo(fmt.Appendf(nil, "%s %s", h.Name, addr), addr)
			}
		}()
	}
}

func tcpExchange(ctx context.Context, from *Host, to netip.AddrPort) (string, error) {
	conn, err := from.DialTCP(ctx, to)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if d, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(d)
	}
	return bufio.NewReader(conn).ReadString('\n')
}

func udpExchange(ctx context.Context, from *Host, to netip.AddrPort) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	b, err := from.UDPExchange(ctx, to, []byte("hello"))
	return string(b), err
}

// addrPortPrefix is how a client address starts in an echo: "1.2.3.4:" or
// "[2001:db8::1]:".
func addrPortPrefix(a netip.Addr) string {
	return strings.TrimSuffix(netip.AddrPortFrom(a, 0).String(), "0")
}

func readSysctl(t *testing.T, h *Host, path string) string {
	t.Helper()
	var b []byte
	if err := h.Do(func() (err error) { b, err = os.ReadFile(filepath.Join("/proc/sys", path)); return err }); err != nil {
		t.Fatalf("read %s in %s: %v", path, h.Name, err)
	}
	return strings.TrimSpace(string(b))
}

func eventually(ctx context.Context, timeout time.Duration, try func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		attempt, cancelAttempt := context.WithTimeout(ctx, 500*time.Millisecond)
		err := try(attempt)
		cancelAttempt()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func namespacesWith(t *testing.T, prefix string) []string {
	t.Helper()
	names, err := namespaces()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			got = append(got, n)
		}
	}
	return got
}

// running reports whether pid exists and is not a zombie waiting for its
// reaper.
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z")
}

func ipNetns(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", append([]string{"netns"}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("ip netns %v: %v: %s", args, err, out)
	}
}

// waitInNamespace waits until pid has entered the named namespace.
func waitInNamespace(t *testing.T, name string, pid int) {
	t.Helper()
	want, err := os.Stat(filepath.Join(netnsDir, name))
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if got, err := os.Stat(fmt.Sprintf("/proc/%d/ns/net", pid)); err == nil && os.SameFile(got, want) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("process %d never entered %s", pid, name)
}

// rootNamespace lists the links and addresses of the test's own namespace
// (read only).
func rootNamespace(t *testing.T) []string {
	t.Helper()
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, link := range links {
		got = append(got, fmt.Sprintf("link %s %s", link.Attrs().Name, link.Attrs().OperState))
		addrs, err := netlink.AddrList(link, netlink.FAMILY_ALL)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range addrs {
			got = append(got, fmt.Sprintf("addr %s %s", link.Attrs().Name, a.IPNet))
		}
	}
	return got
}

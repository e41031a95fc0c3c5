package vip

// Two network namespaces, "a" and "b", joined by a veth pair (eth0 in each).
// The pair is created inside a and its peer moved straight to b: nothing
// passes through, or changes in, the root namespace. Namespaces are named
// "<labPrefix><pid>-<host>" and deleted when the test ends, whatever the
// outcome; those of earlier runs whose process is gone are deleted first.

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

const labPrefix = "gcvip"

type lab struct {
	t  *testing.T
	id string
	ns map[string]netns.NsHandle
}

func newLab(t *testing.T) *lab {
	t.Helper()
	if testing.Short() {
		t.Skip("kernel test skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("kernel test needs root (network namespaces)")
	}
	deleteStaleLabs(t)
	l := &lab{t: t, id: fmt.Sprintf("%s%d", labPrefix, os.Getpid()), ns: map[string]netns.NsHandle{}}
	t.Cleanup(l.destroy)
	for _, h := range []string{"a", "b"} {
		l.ip("netns", "add", l.name(h))
		handle, err := netns.GetFromName(l.name(h))
		if err != nil {
			t.Fatalf("open namespace %s: %v", l.name(h), err)
		}
		l.ns[h] = handle
	}
	l.ip("-n", l.name("a"), "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", l.name("b"))
	for _, h := range []string{"a", "b"} {
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
func deleteStaleLabs(t *testing.T) {
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		id, _, ok := strings.Cut(strings.TrimPrefix(e.Name(), labPrefix), "-")
		pid, err := strconv.Atoi(id)
		if !strings.HasPrefix(e.Name(), labPrefix) || !ok || err != nil || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat(filepath.Join("/proc", id)); err == nil {
			continue
		}
		t.Logf("deleting namespace %s left by an earlier run", e.Name())
		_ = exec.Command("ip", "netns", "del", e.Name()).Run()
	}
}

// ip runs the ip command; every call names a lab namespace (-n) or creates one.
func (l *lab) ip(args ...string) {
	l.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		l.t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// addr adds an address to a host's eth0 the way an operator would.
func (l *lab) addr(host, prefix string) {
	l.t.Helper()
	args := []string{"-n", l.name(host), "addr", "add", prefix, "dev", "eth0"}
	if netip.MustParsePrefix(prefix).Addr().Is6() {
		args = append(args, "nodad")
	}
	l.ip(args...)
}

// addrs lists a host's eth0 addresses through the ip command, independently
// of the package's own netlink code.
func (l *lab) addrs(host string) map[netip.Prefix]bool {
	l.t.Helper()
	out, err := exec.Command("ip", "-j", "-n", l.name(host), "addr", "show", "dev", "eth0").Output()
	if err != nil {
		l.t.Fatalf("ip addr show in %s: %v", host, err)
	}
	var links []struct {
		AddrInfo []struct {
			Local     string `json:"local"`
			PrefixLen int    `json:"prefixlen"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		l.t.Fatalf("parse ip addr show: %v", err)
	}
	res := map[netip.Prefix]bool{}
	for _, li := range links {
		for _, a := range li.AddrInfo {
			res[netip.PrefixFrom(netip.MustParseAddr(a.Local), a.PrefixLen)] = true
		}
	}
	return res
}

func (l *lab) handle(host string) *netlink.Handle {
	l.t.Helper()
	h, err := netlink.NewHandleAt(l.ns[host])
	if err != nil {
		l.t.Fatalf("netlink handle in %s: %v", host, err)
	}
	l.t.Cleanup(h.Close)
	return h
}

func (l *lab) mac(host string) net.HardwareAddr {
	l.t.Helper()
	link, err := l.handle(host).LinkByName("eth0")
	if err != nil {
		l.t.Fatalf("eth0 in %s: %v", host, err)
	}
	return link.Attrs().HardwareAddr
}

// neighbour returns host's neighbour entry for a on eth0, if any.
func (l *lab) neighbour(host string, a netip.Addr) (net.HardwareAddr, int, bool) {
	l.t.Helper()
	h := l.handle(host)
	link, err := h.LinkByName("eth0")
	if err != nil {
		l.t.Fatalf("eth0 in %s: %v", host, err)
	}
	family := unix.AF_INET6
	if a.Is4() {
		family = unix.AF_INET
	}
	neighs, err := h.NeighList(link.Attrs().Index, family)
	if err != nil {
		l.t.Fatalf("neighbours of %s: %v", host, err)
	}
	for _, n := range neighs {
		if na, ok := netip.AddrFromSlice(n.IP); ok && na.Unmap() == a {
			return n.HardwareAddr, n.State, true
		}
	}
	return nil, 0, false
}

// do runs fn on a thread inside host's namespace.
func (l *lab) do(host string, fn func() error) error { return inNamespace(l.ns[host], fn) }

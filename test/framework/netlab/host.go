package netlab

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// HostOptions configure a host. The zero value is a host with the next free
// addresses and the kernel's default sysctls (but no IPv6 DAD).
type HostOptions struct {
	// Addr4 and Addr6 are the host's addresses; zero means the lowest free
	// address of the lab's subnet.
	Addr4, Addr6 netip.Addr
	// Forwarding turns on IPv4 and IPv6 forwarding (a router or a
	// load-balancer host).
	Forwarding bool
	// Sysctls are set after the host's link exists, in key order, e.g.
	// {"net.netfilter.nf_conntrack_tcp_loose": "0"}; see Host.SetSysctl.
	Sysctls map[string]string
}

// Host is a namespace joined to the lab's bridge. Its exported fields are
// read-only.
type Host struct {
	// Name is the host's name in the lab; Netns names its namespace
	// ("<prefix>-<name>", for `ip netns exec`).
	Name, Netns string
	// Iface is the host's link to the bridge ("eth0"); Port is the other
	// end of the veth pair, a port of the bridge in the switch namespace.
	Iface, Port string
	// Addr4 and Addr6 are Iface's addresses, in the lab's subnets.
	Addr4, Addr6 netip.Addr

	lab *Lab
	ns  netns.NsHandle
	// bits4 and bits6, when not 0, are the lengths of Addr4's and Addr6's
	// networks: a host behind a router (Lab.AddHostBehind) is not in the
	// lab's subnets.
	bits4, bits6 int
}

// hostSysctls are set in every host namespace before its link exists, so
// that the link inherits them: addresses are usable at once (no DAD), and
// IPv6 addresses survive SetLink(false) (the kernel flushes them on link
// down unless keep_addr_on_down is set).
var hostSysctls = [][2]string{
	{"net.ipv6.conf.all.accept_dad", "0"},
	{"net.ipv6.conf.default.accept_dad", "0"},
	{"net.ipv6.conf.all.keep_addr_on_down", "1"},
	{"net.ipv6.conf.default.keep_addr_on_down", "1"},
}

// AddHost creates a host namespace named "<prefix>-<name>", joins it to the
// bridge and configures it. name is lower-case letters, digits and inner
// dashes, at most 32 characters, and not "switch". ctx bounds the setup
// only. On error nothing of the host is left behind.
func (l *Lab) AddHost(ctx context.Context, name string, opts HostOptions) (*Host, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkNewHost(name); err != nil {
		return nil, fmt.Errorf("add host %s: %w", name, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("add host %s: %w", name, err)
	}
	h := &Host{
		Name:  name,
		Netns: l.Prefix + "-" + name,
		Iface: hostIface,
		Port:  fmt.Sprintf("v%d", l.ports+1),
		lab:   l,
		ns:    netns.None(),
	}
	var err error
	if h.Addr4, err = l.pool4.take(opts.Addr4); err != nil {
		return nil, fmt.Errorf("add host %s: %w", name, err)
	}
	if h.Addr6, err = l.pool6.take(opts.Addr6); err != nil {
		l.pool4.release(h.Addr4)
		return nil, fmt.Errorf("add host %s: %w", name, err)
	}
	// A failed host's veth may outlive it for a moment (namespaces are
	// freed asynchronously), so port names are never reused.
	l.ports++
	if err := l.createHost(h, opts); err != nil {
		l.pool4.release(h.Addr4)
		l.pool6.release(h.Addr6)
		if h.ns.IsOpen() { // ours (a namespace that was there already is not)
			h.ns.Close()
			err = errors.Join(err, removeNamespace(h.Netns))
		}
		return nil, fmt.Errorf("add host %s: %w", name, err)
	}
	l.hosts = append(l.hosts, h)
	return h, nil
}

func (l *Lab) checkNewHost(name string) error {
	switch {
	case l.closed:
		return errClosed
	case !hostRE.MatchString(name) || name == switchName:
		return errors.New("invalid name: want 1-32 lower-case letters, digits and inner dashes, not \"switch\"")
	}
	for _, h := range l.hosts {
		if h.Name == name {
			return errors.New("exists")
		}
	}
	return nil
}

func (l *Lab) createHost(h *Host, opts HostOptions) error {
	ns, err := createNamespace(h.Netns)
	if err != nil {
		return err
	}
	h.ns = ns
	for _, kv := range hostSysctls {
		if err := writeSysctl(ns, kv[0], kv[1]); err != nil {
			return err
		}
	}
	if err := l.plugIn(h); err != nil {
		return err
	}
	if err := h.configure(); err != nil {
		return err
	}
	if opts.Forwarding {
		for _, key := range []string{"net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding"} {
			if err := writeSysctl(ns, key, "1"); err != nil {
				return err
			}
		}
	}
	for _, key := range slices.Sorted(maps.Keys(opts.Sysctls)) {
		if err := writeSysctl(ns, key, opts.Sysctls[key]); err != nil {
			return err
		}
	}
	return nil
}

// addVeth creates h's veth pair with nl's namespace holding the peer end
// h.Port and h's namespace the end h.Iface, and returns the peer end.
func addVeth(nl *netlink.Handle, h *Host) (netlink.Link, error) {
	veth := &netlink.Veth{
		LinkAttrs: netlink.LinkAttrs{Name: h.Iface, Namespace: netlink.NsFd(int(h.ns))},
		PeerName:  h.Port,
	}
	if err := nl.LinkAdd(veth); err != nil {
		return nil, fmt.Errorf("add veth %s/%s: %w", h.Iface, h.Port, err)
	}
	port, err := nl.LinkByName(h.Port)
	if err != nil {
		return nil, fmt.Errorf("find %s: %w", h.Port, err)
	}
	return port, nil
}

// plugIn creates h's veth pair from inside the switch namespace, with the
// host end created directly in h's namespace, and makes the switch end a
// port of the bridge.
func (l *Lab) plugIn(h *Host) error {
	nl, err := netlinkIn(l.switchNS)
	if err != nil {
		return fmt.Errorf("netlink in %s: %w", l.SwitchNetns, err)
	}
	defer nl.Close()
	port, err := addVeth(nl, h)
	if err != nil {
		return err
	}
	br, err := nl.LinkByName(bridgeName)
	if err != nil {
		return fmt.Errorf("find bridge: %w", err)
	}
	if err := nl.LinkSetAlias(port, h.Name); err != nil {
		return fmt.Errorf("name bridge port %s: %w", h.Port, err)
	}
	if err := nl.LinkSetMaster(port, br); err != nil {
		return fmt.Errorf("attach %s to bridge: %w", h.Port, err)
	}
	if err := nl.LinkSetUp(port); err != nil {
		return fmt.Errorf("set %s up: %w", h.Port, err)
	}
	return nil
}

// configure sets lo and the host's link up and adds its addresses.
func (h *Host) configure() error {
	nl, err := netlinkIn(h.ns)
	if err != nil {
		return fmt.Errorf("netlink in %s: %w", h.Netns, err)
	}
	defer nl.Close()
	for _, name := range []string{"lo", h.Iface} {
		link, err := nl.LinkByName(name)
		if err != nil {
			return fmt.Errorf("find %s: %w", name, err)
		}
		if err := nl.LinkSetUp(link); err != nil {
			return fmt.Errorf("set %s up: %w", name, err)
		}
	}
	link, err := nl.LinkByName(h.Iface)
	if err != nil {
		return fmt.Errorf("find %s: %w", h.Iface, err)
	}
	for _, p := range []netip.Prefix{h.Prefix4(), h.Prefix6()} {
		addr := &netlink.Addr{IPNet: prefixToIPNet(p), Flags: unix.IFA_F_NODAD}
		if err := nl.AddrAdd(link, addr); err != nil {
			return fmt.Errorf("add address %s: %w", p, err)
		}
	}
	return nil
}

// Prefix4 is Addr4 with the length of its network (the lab's IPv4 subnet
// but for a host behind a router).
func (h *Host) Prefix4() netip.Prefix {
	if h.bits4 != 0 {
		return netip.PrefixFrom(h.Addr4, h.bits4)
	}
	return netip.PrefixFrom(h.Addr4, h.lab.Subnet4.Bits())
}

// Prefix6 is Addr6 with the length of its network (the lab's IPv6 subnet
// but for a host behind a router).
func (h *Host) Prefix6() netip.Prefix {
	if h.bits6 != 0 {
		return netip.PrefixFrom(h.Addr6, h.bits6)
	}
	return netip.PrefixFrom(h.Addr6, h.lab.Subnet6.Bits())
}

// Do runs fn on an OS thread switched into the host's namespace and waits
// for it; the thread is switched back afterwards (or discarded if it cannot
// be). Sockets fn creates stay in the namespace and may be used from any
// goroutine; processes fn starts run in it; goroutines fn starts do not.
func (h *Host) Do(fn func() error) error {
	return inNamespace(h.ns, fn)
}

// Command returns a command that runs name inside the host's namespace
// (through `ip netns exec`). Running it, and ending it, is the caller's
// job; see Start for processes the lab looks after.
func (h *Host) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", h.Netns, name}, args...)...)
}

// Nsenter returns a command that runs name inside the host's network
// namespace through `nsenter --net`, with more nsenter flags before it
// (say --mount=/proc/<pid>/ns/mnt). Unlike Command it leaves /sys alone:
// `ip netns exec` remounts /sys for the namespace, which hides the cgroup
// hierarchy from what runs there (a kubelet, a container runtime).
func (h *Host) Nsenter(ctx context.Context, flags []string, name string, args ...string) *exec.Cmd {
	full := append([]string{"--net=" + filepath.Join(netnsDir, h.Netns)}, flags...)
	full = append(append(full, "--", name), args...)
	return exec.CommandContext(ctx, "nsenter", full...)
}

// AddAddress adds an address to one of the host's interfaces (its loopback
// "lo", say, for an address every host answers locally).
func (h *Host) AddAddress(iface string, p netip.Prefix) error {
	nl, err := netlinkIn(h.ns)
	if err != nil {
		return fmt.Errorf("add address on %s: %w", h.Name, err)
	}
	defer nl.Close()
	link, err := nl.LinkByName(iface)
	if err != nil {
		return fmt.Errorf("add address on %s: %w", h.Name, err)
	}
	if err := nl.AddrAdd(link, &netlink.Addr{IPNet: prefixToIPNet(p), Flags: unix.IFA_F_NODAD}); err != nil {
		return fmt.Errorf("add address %s to %s of %s: %w", p, iface, h.Name, err)
	}
	return nil
}

// AddRoute routes dst out of one of the host's interfaces, on-link (no
// gateway).
func (h *Host) AddRoute(dst netip.Prefix, iface string) error {
	nl, err := netlinkIn(h.ns)
	if err != nil {
		return fmt.Errorf("add route on %s: %w", h.Name, err)
	}
	defer nl.Close()
	link, err := nl.LinkByName(iface)
	if err != nil {
		return fmt.Errorf("add route on %s: %w", h.Name, err)
	}
	route := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: prefixToIPNet(dst.Masked()), Scope: netlink.SCOPE_LINK}
	if err := nl.RouteAdd(route); err != nil {
		return fmt.Errorf("add route %s dev %s on %s: %w", dst, iface, h.Name, err)
	}
	return nil
}

// MAC is the link-layer address of the host's interface, as
// net.HardwareAddr prints it.
func (h *Host) MAC() (string, error) {
	var mac string
	err := h.Do(func() error {
		ifi, err := net.InterfaceByName(h.Iface)
		if err == nil {
			mac = ifi.HardwareAddr.String()
		}
		return err
	})
	return mac, err
}

// SetLink sets the host's link to the bridge up or down, as if its cable
// were plugged or pulled. Addresses are kept while it is down.
func (h *Host) SetLink(up bool) error {
	nl, err := netlinkIn(h.ns)
	if err != nil {
		return fmt.Errorf("set link of %s: %w", h.Name, err)
	}
	defer nl.Close()
	link, err := nl.LinkByName(h.Iface)
	if err != nil {
		return fmt.Errorf("set link of %s: %w", h.Name, err)
	}
	if up {
		err = nl.LinkSetUp(link)
	} else {
		err = nl.LinkSetDown(link)
	}
	if err != nil {
		return fmt.Errorf("set link of %s up=%t: %w", h.Name, up, err)
	}
	return nil
}

// SetSysctl sets a sysctl inside the host's namespace. key is dotted
// ("net.ipv4.ip_forward") or a path under /proc/sys ("net/ipv4/ip_forward",
// needed when a part contains a dot, such as an interface "eth0.100").
func (h *Host) SetSysctl(key, value string) error {
	if err := writeSysctl(h.ns, key, value); err != nil {
		return fmt.Errorf("host %s: %w", h.Name, err)
	}
	return nil
}

// writeSysctl writes /proc/sys from a thread inside ns: /proc/sys/net shows
// the network namespace of the thread that opens it.
func writeSysctl(ns netns.NsHandle, key, value string) error {
	path := key
	if !strings.Contains(path, "/") {
		path = strings.ReplaceAll(path, ".", "/")
	}
	path = filepath.Join("/proc/sys", filepath.Clean("/"+path))
	err := inNamespace(ns, func() error { return os.WriteFile(path, []byte(value), 0o644) })
	if err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", key, value, err)
	}
	return nil
}

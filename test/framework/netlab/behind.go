package netlab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// AddHostBehind creates a host that is not on the lab's bridge but on a
// network of its own behind gw, a lab host that routes for it: a client
// network behind a router, as a runner outside the nodes' subnets needs.
// The new host's namespace is "<prefix>-<name>"; its link "eth0" is a veth
// to gw, whose end (named after the host) holds the first address of net4
// and of net6 and gets IPv4 and IPv6 forwarding. The host takes the second
// address of each and routes everything through gw. Routes back to net4
// and net6 are the caller's to add (a router peering with the hosts, or
// static routes on them). Close removes it with the lab.
func (l *Lab) AddHostBehind(ctx context.Context, name string, gw *Host, net4, net6 netip.Prefix) (*Host, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkNewHost(name); err != nil {
		return nil, fmt.Errorf("add host %s: %w", name, err)
	}
	if err := checkBehind(l, net4, net6); err != nil {
		return nil, fmt.Errorf("add host %s: %w", name, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("add host %s: %w", name, err)
	}
	h := &Host{
		Name:  name,
		Netns: l.Prefix + "-" + name,
		Iface: hostIface,
		Port:  "to-" + name,
		Addr4: Nth(net4, 2),
		Addr6: Nth(net6, 2),
		lab:   l,
		ns:    netns.None(),
		bits4: net4.Bits(),
		bits6: net6.Bits(),
	}
	if len(h.Port) > 15 {
		h.Port = h.Port[:15]
	}
	if err := l.createBehind(h, gw, net4, net6); err != nil {
		if h.ns.IsOpen() {
			h.ns.Close()
			err = errors.Join(err, removeNamespace(h.Netns))
		}
		return nil, fmt.Errorf("add host %s behind %s: %w", name, gw.Name, err)
	}
	l.hosts = append(l.hosts, h)
	return h, nil
}

// checkBehind accepts an IPv4 and an IPv6 network that overlap none of the
// lab's subnets.
func checkBehind(l *Lab, net4, net6 netip.Prefix) error {
	if err := checkSubnet("net4", net4, true); err != nil {
		return err
	}
	if err := checkSubnet("net6", net6, false); err != nil {
		return err
	}
	if net4.Overlaps(l.Subnet4) || net6.Overlaps(l.Subnet6) {
		return fmt.Errorf("networks %s and %s: want neither to overlap the lab's %s and %s", net4, net6, l.Subnet4, l.Subnet6)
	}
	return nil
}

func (l *Lab) createBehind(h, gw *Host, net4, net6 netip.Prefix) error {
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
	// The gateway's end is made in its namespace with the host's end
	// created directly in the host's, as plugIn does for the bridge.
	nl, err := netlinkIn(gw.ns)
	if err != nil {
		return fmt.Errorf("netlink in %s: %w", gw.Netns, err)
	}
	defer nl.Close()
	port, err := addVeth(nl, h)
	if err != nil {
		return err
	}
	for _, p := range []netip.Prefix{netip.PrefixFrom(Nth(net4, 1), net4.Bits()), netip.PrefixFrom(Nth(net6, 1), net6.Bits())} {
		if err := nl.AddrAdd(port, &netlink.Addr{IPNet: prefixToIPNet(p), Flags: unix.IFA_F_NODAD}); err != nil {
			return fmt.Errorf("add address %s to %s of %s: %w", p, h.Port, gw.Name, err)
		}
	}
	if err := nl.LinkSetUp(port); err != nil {
		return fmt.Errorf("set %s up: %w", h.Port, err)
	}
	for _, key := range []string{"net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding"} {
		if err := writeSysctl(gw.ns, key, "1"); err != nil {
			return err
		}
	}
	if err := h.configure(); err != nil {
		return err
	}
	return h.routeVia(Nth(net4, 1), Nth(net6, 1))
}

// routeVia gives the host default routes through gw4 and gw6.
func (h *Host) routeVia(gw4, gw6 netip.Addr) error {
	nl, err := netlinkIn(h.ns)
	if err != nil {
		return fmt.Errorf("netlink in %s: %w", h.Netns, err)
	}
	defer nl.Close()
	link, err := nl.LinkByName(h.Iface)
	if err != nil {
		return fmt.Errorf("find %s: %w", h.Iface, err)
	}
	for _, gw := range []netip.Addr{gw4, gw6} {
		route := &netlink.Route{LinkIndex: link.Attrs().Index, Gw: gw.AsSlice()}
		if err := nl.RouteAdd(route); err != nil {
			return fmt.Errorf("default route via %s on %s: %w", gw, h.Name, err)
		}
	}
	return nil
}

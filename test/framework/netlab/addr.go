package netlab

import (
	"fmt"
	"net/netip"
)

// addrPool hands out the addresses of one subnet. The subnet's first
// address is its name, the second is kept for a gateway (see Lab.Gateway4)
// and an IPv4 subnet's last is its broadcast address; none of them is given
// to a host.
type addrPool struct {
	subnet netip.Prefix
	used   map[netip.Addr]bool
}

func newAddrPool(subnet netip.Prefix) *addrPool {
	return &addrPool{subnet: subnet, used: map[netip.Addr]bool{}}
}

// gateway is the address kept for a gateway.
func (p *addrPool) gateway() netip.Addr { return p.subnet.Addr().Next() }

// usable reports whether a may be given to a host.
func (p *addrPool) usable(a netip.Addr) bool {
	if !p.subnet.Contains(a) || a == p.subnet.Addr() || a == p.gateway() {
		return false
	}
	return !(a.Is4() && !p.subnet.Contains(a.Next())) // broadcast
}

// take reserves want, or the lowest free address when want is invalid.
func (p *addrPool) take(want netip.Addr) (netip.Addr, error) {
	if want.IsValid() {
		switch {
		case !p.usable(want):
			return netip.Addr{}, fmt.Errorf("address %s is not usable in %s", want, p.subnet)
		case p.used[want]:
			return netip.Addr{}, fmt.Errorf("address %s is taken", want)
		}
		p.used[want] = true
		return want, nil
	}
	for a := p.gateway().Next(); p.usable(a); a = a.Next() {
		if !p.used[a] {
			p.used[a] = true
			return a, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("no free address in %s", p.subnet)
}

func (p *addrPool) release(a netip.Addr) { delete(p.used, a) }

// checkSubnet accepts a masked prefix of the given family with room for at
// least one host.
func checkSubnet(name string, s netip.Prefix, is4 bool) error {
	maxBits := 126
	if is4 {
		maxBits = 30
	}
	switch {
	case !s.IsValid() || s.Addr().Is4() != is4 || s.Addr().Is4In6():
		return fmt.Errorf("%s %s: not an IPv%s prefix", name, s, map[bool]string{true: "4", false: "6"}[is4])
	case s != s.Masked():
		return fmt.Errorf("%s %s: host bits set (want %s)", name, s, s.Masked())
	case s.Bits() > maxBits:
		return fmt.Errorf("%s %s: too small, want /%d or shorter", name, s, maxBits)
	}
	return nil
}

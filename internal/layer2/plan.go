package layer2

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
)

// kernelAddr is an address of the interface as the kernel reports it.
type kernelAddr struct {
	Prefix netip.Prefix
	Proto  uint8  // IFA_PROTO, 0 when unset
	Flags  uint32 // IFA_F_*
}

// changes turns an interface's addresses into the wanted set.
type changes struct {
	add     []netip.Addr   // wanted and absent
	remove  []netip.Prefix // ours and no longer wanted
	foreign []netip.Addr   // wanted but present without our mark: held, never removed
}

// plan is pure: it compares the wanted addresses with the observed ones.
// ours tells which observed addresses this Manager owns.
func plan(want []netip.Addr, observed []kernelAddr, ours func(kernelAddr) bool) changes {
	var c changes
	present := map[netip.Addr]bool{}
	foreign := map[netip.Addr]bool{}
	// A set: an agent holds thousands of addresses, and looking each
	// observed one up in the list was three quarters of this plan's CPU
	// (a CPU profile while 4,000 Services were created).
	wanted := make(map[netip.Addr]bool, len(want))
	for _, a := range want {
		wanted[a] = true
	}
	for _, o := range observed {
		a := o.Prefix.Addr()
		present[a] = true
		if !ours(o) {
			foreign[a] = true
			continue
		}
		if !wanted[a] {
			c.remove = append(c.remove, o.Prefix)
		}
	}
	for _, a := range want {
		switch {
		case !present[a]:
			c.add = append(c.add, a)
		case foreign[a]:
			c.foreign = append(c.foreign, a)
		}
	}
	slices.SortFunc(c.remove, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	return c
}

// normalize returns the usable addresses of want, unmapped, sorted and
// without duplicates, and an error naming each unusable one.
func normalize(want []netip.Addr) ([]netip.Addr, error) {
	var ok []netip.Addr
	var errs []error
	for _, a := range want {
		a = a.Unmap()
		if err := Usable(a); err != nil {
			errs = append(errs, err)
			continue
		}
		ok = append(ok, a)
	}
	slices.SortFunc(ok, netip.Addr.Compare)
	return slices.Compact(ok), errors.Join(errs...)
}

// Usable reports why a cannot be a virtual IP (nil when it can): it must
// be a valid unicast address without a zone, neither unspecified,
// multicast, loopback nor link-local.
func Usable(a netip.Addr) error {
	switch {
	case !a.IsValid():
		return errors.New("invalid address")
	case a.Zone() != "":
		return fmt.Errorf("address %s: zones are not allowed", a)
	case a.IsUnspecified(), a.IsMulticast(), a.IsLoopback(), a.IsLinkLocalUnicast():
		return fmt.Errorf("address %s: not usable as a virtual IP", a)
	}
	return nil
}

// hostPrefix is a as a /32 or /128.
func hostPrefix(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }

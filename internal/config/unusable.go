package config

import (
	"fmt"
	"net/netip"
	"strings"
)

// unusableBlock is a block of addresses that cannot be a LoadBalancer
// Service's address: nothing would reach it, or the kernel would not send
// or answer for it as a unicast destination.
type unusableBlock struct {
	what  string // "loopback addresses", "the broadcast address"
	block AddrRange
}

// unusableBlocks are refused in pool ranges. IPv4-mapped IPv6 addresses are
// refused too: they are IPv4 addresses in IPv6 dress, and an allocation
// holding one could not be restored from its record.
var unusableBlocks = []unusableBlock{
	{"the unspecified address", prefixRange("0.0.0.0/32")},
	{"loopback addresses", prefixRange("127.0.0.0/8")},
	{"link-local addresses", prefixRange("169.254.0.0/16")},
	{"multicast addresses", prefixRange("224.0.0.0/4")},
	{"the broadcast address", prefixRange("255.255.255.255/32")},
	{"the unspecified address", prefixRange("::/128")},
	{"the loopback address", prefixRange("::1/128")},
	{"IPv4-mapped addresses", prefixRange("::ffff:0:0/96")},
	{"link-local addresses", prefixRange("fe80::/10")},
	{"multicast addresses", prefixRange("ff00::/8")},
}

func prefixRange(s string) AddrRange {
	p := netip.MustParsePrefix(s)
	return AddrRange{First: p.Addr(), Last: lastAddr(p)}
}

// String names the block for a message: "loopback addresses (127.0.0.0/8)",
// "the broadcast address 255.255.255.255".
func (u unusableBlock) String() string {
	if u.block.First == u.block.Last {
		return u.what + " " + u.block.First.String()
	}
	return u.what + " (" + u.block.String() + ")"
}

// parsePoolRange parses a range of a pool: an address range that contains
// no unusable address.
func parsePoolRange(s string) (AddrRange, error) {
	r, err := ParseAddrRange(s)
	if err != nil {
		return AddrRange{}, err
	}
	return r, checkUsable(r)
}

// checkUsable refuses a range that contains an address of an unusable block,
// naming every such block.
func checkUsable(r AddrRange) error {
	var hits []string
	for _, u := range unusableBlocks {
		if r.overlaps(u.block) {
			hits = append(hits, u.String())
		}
	}
	if len(hits) == 0 {
		return nil
	}
	list := hits[0]
	if n := len(hits); n > 1 {
		list = strings.Join(hits[:n-1], ", ") + " and " + hits[n-1]
	}
	return fmt.Errorf("%s contains %s, which cannot be a Service's address; write ranges that leave them out", r, list)
}

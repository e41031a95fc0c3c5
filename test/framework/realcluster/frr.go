package realcluster

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"time"

	"github.com/groundcloud/groundcloud/test/framework/frr"
	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

// The AS numbers of the test bed's BGP: the router's, and the
// load-balancer hosts' (one AS, so that every host's route has the same
// AS path and the router uses them all).
const (
	PeerASN  = 64512
	HostsASN = 64513
)

// BGPPeers is the cloud-config of a router on host h that every
// load-balancer host peers with, over IPv4 and over IPv6, with a 3 s hold
// time (the least BGP allows: a crashed host's routes go after 3 s).
func BGPPeers(h *netlab.Host) string {
	return bgpPeers(h, "")
}

// BFDInterval is the interval of the test bed's BFD sessions, both ways,
// times BFDMultiplier: a host is declared gone after 300 ms.
const (
	BFDInterval   = 100 * time.Millisecond
	BFDMultiplier = 3
)

// BGPPeersBFD is BGPPeers with BFD on the IPv4 session (BFDInterval times
// BFDMultiplier); the IPv6 session runs without, on its hold time. The
// router's side is EnableBFD.
func BGPPeersBFD(h *netlab.Host) string {
	return bgpPeers(h, bfdKeys())
}

func bfdKeys() string {
	return fmt.Sprintf("bfd = true\nbfd-transmit-interval = %s\nbfd-receive-interval = %[1]s\nbfd-detect-multiplier = %d\n", BFDInterval, BFDMultiplier)
}

// BGPPeersBFDGracefulRestart is BGPPeersBFD with graceful restart on the
// IPv4 session too (graceful-restart = true; FRR helps by default).
func BGPPeersBFDGracefulRestart(h *netlab.Host) string {
	return bgpPeers(h, bfdKeys()+"graceful-restart = true\n")
}

func bgpPeers(h *netlab.Host, bfd4 string) string {
	peer := func(name string, a netip.Addr, extra string) string {
		return fmt.Sprintf("[BGPPeer %q]\naddress = %s\nasn = %d\nlocal-asn = %d\nhold-time = 3s\nkeepalive-time = 1s\n%s\n", name, a, PeerASN, HostsASN, extra)
	}
	return peer(h.Name, h.Addr4, bfd4) + peer(h.Name+"6", h.Addr6, "")
}

// EnableBFD has router r (StartFRR's) run BFD with the hosts of its IPv4
// sessions, BFDInterval times BFDMultiplier, and take a host's BGP
// session down when its BFD session goes down: the router's side of
// BGPPeersBFD. Hosts that do not run BFD keep their BGP sessions (FRR
// acts only on a BFD session that was up).
func EnableBFD(ctx context.Context, r *frr.Instance) error {
	ms := fmt.Sprint(BFDInterval.Milliseconds())
	return r.Configure(ctx, "bfd", "profile hosts", "transmit-interval "+ms, "receive-interval "+ms,
		fmt.Sprintf("detect-multiplier %d", BFDMultiplier), "exit", "exit",
		fmt.Sprintf("router bgp %d", PeerASN), "neighbor LB bfd", "neighbor LB bfd profile hosts")
}

// StartFRR runs FRR (test/framework/frr) in host h of the cluster's lab, as a
// router for the clients: it accepts BGP sessions from any host of the
// lab's subnets (dynamic neighbours), installs up to 8 equal paths per
// prefix and hashes flows over them by their L4 ports. Forwarding, the
// hash policy and no ICMP redirects (it forwards out of the interface it
// received on) are set in h's own namespace. Its logs go to Dir/frr.
func (c *Cluster) StartFRR(ctx context.Context, h *netlab.Host) (*frr.Instance, error) {
	for _, kv := range [][2]string{
		{"net.ipv4.ip_forward", "1"},
		{"net.ipv6.conf.all.forwarding", "1"},
		{"net.ipv4.fib_multipath_hash_policy", "1"},
		{"net.ipv6.fib_multipath_hash_policy", "1"},
		{"net.ipv4.conf.all.send_redirects", "0"},
		{"net.ipv4.conf.default.send_redirects", "0"},
		{"net/ipv4/conf/" + h.Iface + "/send_redirects", "0"},
	} {
		if err := h.SetSysctl(kv[0], kv[1]); err != nil {
			return nil, err
		}
	}
	conf := fmt.Sprintf(`frr defaults datacenter
hostname %s
!
router bgp %d
 bgp router-id %s
 no bgp ebgp-requires-policy
 no bgp default ipv4-unicast
 bgp bestpath as-path multipath-relax
 neighbor LB peer-group
 neighbor LB remote-as %d
 neighbor LB timers 1 3
 neighbor LB6 peer-group
 neighbor LB6 remote-as %d
 neighbor LB6 timers 1 3
 bgp listen range %s peer-group LB
 bgp listen range %s peer-group LB6
 !
 address-family ipv4 unicast
  neighbor LB activate
  maximum-paths 8
 exit-address-family
 !
 address-family ipv6 unicast
  neighbor LB6 activate
  maximum-paths 8
 exit-address-family
!
`, h.Name, PeerASN, h.Addr4, HostsASN, HostsASN, c.Opts.Subnet4, c.Opts.Subnet6)
	return frr.Start(ctx, h, filepath.Join(c.Opts.Dir, "frr"), conf)
}

// RouteThrough sends h's traffic to prefixes through router, and has h
// ignore ICMP redirects (IPv6 has no switch to stop a router sending
// them), as a client behind the router.
func RouteThrough(ctx context.Context, h, router *netlab.Host, prefixes ...netip.Prefix) error {
	for _, k := range []string{"net.ipv4.conf.all.accept_redirects", "net/ipv4/conf/" + h.Iface + "/accept_redirects",
		"net.ipv6.conf.all.accept_redirects", "net/ipv6/conf/" + h.Iface + "/accept_redirects"} {
		if err := h.SetSysctl(k, "0"); err != nil {
			return err
		}
	}
	for _, p := range prefixes {
		via, fam := router.Addr4, "-4"
		if p.Addr().Is6() {
			via, fam = router.Addr6, "-6"
		}
		if out, err := h.Command(ctx, "ip", fam, "route", "add", p.String(), "via", via.String()).CombinedOutput(); err != nil {
			return fmt.Errorf("route %s via %s in %s: %w: %s", p, via, h.Name, err, out)
		}
	}
	return nil
}

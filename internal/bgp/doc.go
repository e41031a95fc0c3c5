// Package bgp is the agent's BGP speaker: it advertises the addresses of
// the LoadBalancers whose pool says `announce = bgp` as host routes (/32,
// /128) to the routers of the cloud-config's [BGPPeer] sections, and
// withdraws them before the host stops serving.
//
// routes.go is the pure core: from the LoadBalancers this host serves,
// whether it serves at all, and which addresses it holds, the routes it
// should advertise (Desired), the difference to what it advertises
// (Diff), and which of them the established sessions carry (Carried). speaker.go is the thin shell that drives GoBGP; nothing else in
// the package talks to the network.
//
// Which host advertises what:
//   - Passthrough pools: every healthy selected host advertises every
//     address, so a router with multipath spreads flows over all of them
//     (ECMP). Hosts keep no per-flow state and all compute the same bucket
//     map, so any host sends any packet of a flow to the same node: a
//     router rehashing flows (a host added or gone) moves no connection.
//   - Proxy pools: only the host memberlist elects for an address (the L2
//     holder election, without ARP) advertises it. Proxy forwarding holds
//     conntrack state (DNAT, SNAT to the address) and replies come back to
//     the address, so they must reach the host that holds the flow: with
//     one route per address, requests and replies all go to that host.
//   - A host advertises nothing while it is unhealthy (data plane not
//     programmed, no node answering) and withdraws everything first when it
//     stops (SIGTERM): Run withdraws, waits WithdrawWait for the routers to
//     converge while the data plane still forwards, and only then returns,
//     so the agent removes its rules after the traffic has moved. A crashed
//     host is removed by the peer's hold timer (hold-time in the
//     cloud-config; 3 s is the least BGP allows). BFD would detect it in
//     well under a second; GoBGP has no BFD, so it is not shipped: routers
//     that need faster crash detection run BFD against the host with a
//     separate daemon, or lower the hold time.
//
// A peer that cannot work never takes the others down: when the speaker
// cannot listen on port 179 for its passive peers (binding it needs
// CAP_NET_BIND_SERVICE), GoBGP runs without listening and only the
// passive peers have no session; a peer GoBGP refuses is left out. Each
// is told to Config.PeerFailed, and its session stays down in the
// metrics. Advertised (and so the agent's status) and the metric of
// announced routes count only the routes an established session carries.
//
// The addresses of BGP pools are never added to an interface and never
// answered for by ARP or NDP: the router sends their packets to the host's
// link-layer address as the route's next hop, and the data plane matches
// them by destination before routing (passthrough in the netdev ingress
// hook, proxy in the nat prerouting hook), so the host needs no local
// address for them.
//
// Why GoBGP (github.com/osrg/gobgp/v3, pinned at v3.37.0): it is a BGP
// implementation in Go that embeds as a library (no second daemon, no
// configuration file to render), and it is what Cilium's BGP control plane,
// kube-vip and several other Kubernetes load balancers embed; it does
// IPv4 and IPv6 unicast, multiprotocol sessions, TCP-MD5, multihop and
// per-peer local AS. v3 rather than v4: v3 is the line those projects run
// in production; v4 changes its API without adding what the agent needs.
//
// The package must not: touch addresses, routes or nftables of the host;
// log a password (speaker.go redacts them from GoBGP's log fields).
package bgp

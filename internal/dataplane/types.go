package dataplane

import "net/netip"

// Protocol is a transport protocol a service port carries.
type Protocol string

// The protocols the data plane forwards.
const (
	TCP Protocol = "TCP"
	UDP Protocol = "UDP"
)

// nft returns the protocol's name in nft syntax ("tcp", "udp").
func (p Protocol) nft() string {
	switch p {
	case TCP:
		return "tcp"
	case UDP:
		return "udp"
	}
	return ""
}

// State is everything the data plane of one load-balancer host forwards. It is
// a value: Desired and Syncer.Sync read it and never keep or change it.
type State struct {
	Services []Service
	// Self is the name of the Node this load-balancer host is, if it is one
	// ("" for a dedicated host). A connection the host DNATs to its own
	// NodePort never reaches kube-proxy's NodePort rule (netfilter maps a
	// connection's destination once per hook), so the host gives its own
	// node no new flows while another backend of the service is healthy
	// (see ForNewFlows). That rule is for proxy forwarding only: in
	// passthrough forwarding the buckets of Self are left to the host's own
	// kube-proxy (see Passthrough).
	Self string
	// LBNodes are the Nodes that are load-balancer hosts (Self among
	// them when it is one), sorted. Proxy forwarding gives none of them
	// new flows while a backend outside them is healthy (ForNewFlows), so
	// that every host, Node or not, fills the buckets the same way and a
	// flow keeps its node when its address moves from one host to
	// another. Empty: only Self is left out.
	LBNodes []string
	// Interface is the network interface passthrough forwarding receives
	// the VIPs' packets on and sends them out of to the nodes: the one the
	// VIPs are announced on. Passthrough services are left out while it is
	// empty.
	Interface string
	// Links are the prefixes of Interface (its addresses with their prefix
	// lengths). A node address in none of them is not on a link this host
	// shares, so passthrough forwarding cannot hand it a packet: such a
	// backend gets no passthrough buckets of that family, as if it were
	// unhealthy there, and Validate reports it. Empty Links skip the check.
	Links []netip.Prefix
	// HandOver maps a VIP of proxy forwarding this host took over from
	// another host that is still up (a drain, a rolling update, a
	// take-back) to that host's address on the link, of the VIP's family.
	// A packet for the VIP that no rule translated and conntrack does not
	// know — a node's packet in a flow the previous holder forwarded and
	// this host has not seen yet, such as a server's greeting or the
	// SYN-ACK of a handshake in flight — is copied to that host, which
	// still has the flow's entry and forwards it to the client, before
	// this host drops its own copy (docs/packet-path.md, "After a
	// hand-over"). Entries for other addresses, or of the other family,
	// are left out.
	HandOver map[netip.Addr]netip.Addr
}

// Forwarding is how a load-balancer host hands a service's packets to a
// node.
type Forwarding string

// The forwarding modes.
const (
	// Proxy DNATs new flows to a node's NodePort and SNATs them to the VIP:
	// replies cross this host, the node sees the VIP as the client. The
	// zero value is Proxy.
	Proxy Forwarding = "Proxy"
	// Passthrough forwards each packet unchanged (client source, VIP
	// destination) to the link-layer address of a node on Interface; the
	// node's kube-proxy serves the VIP (Service status ipMode VIP) and
	// replies straight to the client. This host keeps no state per flow.
	Passthrough Forwarding = "Passthrough"
)

// Service is one load-balanced service.
type Service struct {
	// Name is "namespace/name". It is stable for the life of the service and
	// names its chains; it must be unique within a State.
	Name string
	// VIPs are the virtual addresses, IPv4 and/or IPv6. An IPv4 VIP forwards
	// to the backends' IPv4 addresses only, an IPv6 VIP to their IPv6 ones.
	VIPs []netip.Addr
	// Ports are forwarded from every VIP to the same NodePort on a backend.
	Ports []Port
	// Backends are the nodes that may receive traffic. Only healthy ones get
	// new flows; listing unhealthy ones too keeps the buckets of the healthy
	// ones in place when they recover (see Assign).
	Backends []Backend
	// Affinity selects ClientIP affinity: the backend is chosen from the
	// client's address only, not from its address and port.
	Affinity bool
	// SourceRanges are the client prefixes allowed to reach the service;
	// empty allows every client. Packets from other sources are dropped.
	SourceRanges []netip.Prefix
	// Forwarding is Proxy ("" too) or Passthrough.
	Forwarding Forwarding
	// Routed says that the VIPs are routed to this host rather than held
	// on its interface: announced to a router as host routes (BGP), not
	// local addresses of the host. What no rule translates for them is
	// dropped in filter-forward (see addRoutedVIP): routed, it would go
	// back to the router, which sends it here again until its TTL runs
	// out.
	Routed bool
	// BucketGroup, when set, names services whose Backends are the same
	// because they come from the same source (the agent: every Service
	// checked by the same health check, which is every Service with
	// externalTrafficPolicy Cluster). The services of a group share one
	// bucket map per family and forwarding mode, and in proxy forwarding
	// one chain per protocol, whose jhash covers the VIP and port (in
	// passthrough, each service's rule is seeded by its name); a node
	// change or a node's health then rewrites the elements of that one map,
	// not of a map per service, and a service of the group that comes or
	// goes adds or deletes elements only.
	// A service whose backends differ from those of its group's first
	// service (by name) gets a map of its own, as one without a group does.
	BucketGroup string
}

// Port is one forwarded port of a service.
type Port struct {
	// Name is informative only (the Service's port name).
	Name     string
	Protocol Protocol
	// Port is the port on the VIPs.
	Port uint16
	// NodePort is the port on the backends' addresses.
	NodePort uint16
}

// Backend is a node that can receive a service's traffic on its NodePorts.
type Backend struct {
	// Node is the node's name; it identifies the backend in the bucket
	// assignment, so it must be stable and unique within a service.
	Node string
	// Addrs are the node's addresses; the first one of each family is used.
	Addrs []netip.Addr
	// Healthy backends receive new flows; unhealthy ones keep the flows they
	// have (TCP) but get no new ones.
	Healthy bool
}

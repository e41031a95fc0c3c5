// Package layer2 is what the agent does on the client-facing link itself.
// A Manager makes one network interface hold a wanted set of virtual IPs
// and announces them to the link, so that clients and routers send traffic
// for them to this host at once instead of to the previous holder. A Guard
// probes addresses on the link and reads the ARP frames and Neighbor
// Discovery messages in which other stations claim addresses (arp.go,
// ndp.go), for the split-brain guard of internal/membership. The Ethernet
// frames both send are built here (frames.go).
//
// Without the InNamespace option a Manager works in the network namespace
// of the goroutine calling Set, Announce and Cleanup (the agent's: the
// host's).
//
// A Manager owns: the addresses it adds to its interface (IPv4 as /32, IPv6 as /128
// with IFA_F_NODAD, usable at once, and with preferred lifetime 0 so the host
// never picks a virtual IP as the source of its own connections), removing
// them when they are no longer wanted or on Cleanup, and the gratuitous ARP
// (IPv4, an RFC 5227 ARP announcement) and unsolicited neighbour advertisement
// (IPv6, override flag set) bursts that announce them.
//
// Ownership is recorded in the kernel, on the address itself: every address
// it adds carries the address protocol AddrProtocol (IFA_PROTO: Linux 5.18
// and later, both families, visible to any netlink client). An address is
// the Manager's when it carries that mark, or when this Manager added it
// earlier in this process. So a restarted agent adopts, and removes when
// unwanted, the addresses of its predecessor, and never mistakes an address
// someone else added - even one equal to a wanted virtual IP - for its own.
// Kernels before 5.18 ignore the mark: there the in-memory record still
// covers the process's lifetime, but addresses left by a crashed agent are
// not recognised and stay until removed by hand.
//
// A Guard owns its sockets: AF_PACKET for ARP and for sending DAD probes,
// ICMPv6 filtered to Neighbor Solicitations and Advertisements, with the
// solicited-node groups it joins. It sends only RFC 5227 ARP probes and
// RFC 4862 DAD probes, which teach receivers nothing.
//
// It must not: remove or change an address it does not own; touch any
// interface but its own; send an announcement for an address it no longer
// holds (a late announcement after a failover would pull traffic back from
// the new holder); decide which host holds which address, or what another
// station's claim means (its callers do: the agent and internal/membership).
// One Manager per interface and host: two Managers on one interface would
// share the mark and remove each other's addresses.
package layer2

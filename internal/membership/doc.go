// Package membership decides which load-balancer host holds which virtual
// IP when several groundcloud-agents share them, with no apiserver in the
// loop: agents gossip with each other (hashicorp/memberlist, SWIM failure
// detection tuned to about a second, encrypted and authenticated with a
// shared key), each publishes its own State in its gossip metadata, and
// every agent computes the same owners by rendezvous hashing over the
// Ready members (Owners).
//
// The core is pure and table-tested: Owners (who owns what), readiness
// (a host's State from its health over time: Starting, Unhealthy,
// HoldDown, Ready), candidates (who may own), conflicts (what to do when
// another host answers for an address). Gossip is the I/O shell: it runs
// memberlist, rejoins lost members, reads the interface's state, and its
// guard probes owned addresses and listens for other hosts answering for
// them (split brains), through a layer2.Guard (internal/layer2: the ARP
// and Neighbor Discovery on the wire, its sockets and frames).
//
// It owns: its gossip sockets, and the guard's decisions (which addresses
// to probe, what a claim on the link means, whether to yield or defend).
// It must not: add or remove addresses, announce them or program the data
// plane (the agent does, asking Owns; the guard only sends RFC 5227 ARP
// probes and RFC 4862 DAD probes, which teach receivers nothing); talk to
// the apiserver (the agent passes what it learned from the API in Observe,
// and reports what Hooks tell it).
//
// # Rules
//
//   - A host is healthy when its data plane is programmed, its interface
//     is up and some node answers its health check. An unhealthy host owns
//     nothing, so its addresses move to the others.
//   - The owner of an address advertised over BGP (proxy forwarding) is
//     elected among the Ready members with an established BGP session of
//     its family (bgp.go): a host that cannot advertise it never owns it.
//     A regained session waits HoldDown as a regained health does.
//   - A host that becomes healthy after it has seen another member waits
//     HoldDown before it takes its share back: a flapping host moves
//     nothing, and a host whose link comes back rejoins the others before
//     it claims anything. A host that has never seen another (alone, or
//     the first of the agents to start) does not wait.
//   - A restarted agent joins the seeds and the peers found in the API,
//     and listens to the link, before it decides anything, so it never
//     believes it is alone.
//   - A host named in the API (Observation.Hosts) that this process never
//     saw in gossip counts as a Ready member while it is heard claiming an
//     address on the link (presence.go): agents that cannot gossip share
//     the addresses all the same, those that every host may hold (its host
//     groups and BGP sessions are unknown). Gossip errors are counted,
//     logged and reported in Status.
//   - With the apiserver away nothing changes: gossip, health checks and
//     the data plane need it not.
package membership

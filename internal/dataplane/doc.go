// Package dataplane is the nftables data plane of groundcloud-agent on a
// load-balancer host: it makes the kernel forward the traffic of each
// service's VIPs to the NodePorts of its healthy nodes, in the shape of
// kube-proxy's nftables mode and through sigs.k8s.io/knftables.
//
// It owns exactly three tables, "ip groundcloud", "ip6 groundcloud" and
// "netdev groundcloud", and the conntrack entries of UDP flows it
// forwarded. It must not read or change any other table, address, route or
// sysctl: holding and announcing VIPs (L2 or BGP), health checks and
// kernel settings belong to other packages or to the host (CheckHost only
// reports what is missing). A Syncer does not schedule: the caller decides
// when to Sync (rate limits, periodic full resyncs via ForceFullSync); the
// agent lets internal/async's Runner do it.
//
// # Types
//
// State is what one host forwards: Services, each with VIPs, Ports,
// Backends (nodes and their health), a Forwarding mode (Proxy or
// Passthrough), source ranges and an optional BucketGroup; plus the host's
// own node (Self) and interface. Ruleset is the in-memory model of the
// three tables (Table, Chain, Map; a bucket map's contents are Buckets).
// Syncer applies States to the kernel through one knftables.Interface per
// table and a Conntrack (NetlinkConntrack on a host).
//
// # A sync
//
// The core is pure; Syncer is the thin shell around it and the only code
// that talks to the kernel. Syncer.Sync:
//
//  1. skips (and logs) the parts of the State that Validate reports, never
//     failing the rest;
//  2. computes the desired Ruleset (Desired): Assign fills each service's
//     BucketCount hash buckets, the same on every LB host;
//  3. runs one knftables transaction per table (ip, ip6, netdev): FullSync
//     (every object added and flushed, what the table holds beyond deleted)
//     at start, after any error and after ForceFullSync, otherwise
//     PartialSync (only the difference from the last applied Ruleset);
//  4. deletes the conntrack entries of UDP flows whose backend left
//     (StaleUDPFlows); a failure is reported in Result.CleanupErr and
//     retried on the next Sync, and does not fail this one.
//
// In the ip and ip6 tables (proxy forwarding) the nat chains DNAT a new
// flow to "node address . NodePort" from its service port's bucket map and
// SNAT it to the VIP; the filter chains drop sources outside the ranges,
// reject new flows to ports without a healthy backend, and drop what no
// rule translated for a proxy VIP that is a local address (an L2 one; a
// BGP address is not local, and such packets are routed). In the netdev
// table (passthrough forwarding) a chain at the ingress hook of
// State.Interface sends each packet unchanged to the node of its bucket
// with "fwd".
//
// With Syncer.CountTraffic the tables also hold named counters of the
// traffic of each frontend (and, in proxy forwarding, of the new
// connections to each node), looked up by "counter name ... map"; they are
// added and deleted in the same transactions as the rest, never reset by
// a sync, and ReadCounters reads them with what each one counts.
//
// README.md in this directory walks through both tables as nft lists them,
// gives the reasons for their shape (bucket maps, chains per node,
// traffic counters, conntrack clean-up in the kernel) and lists the known
// limits, among
// them what happens to packets for a VIP port no service uses.
// docs/packet-path.md follows a packet from a client to a pod.
package dataplane

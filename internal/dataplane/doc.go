// Package dataplane is the nftables data plane of groundcloud-agent on a
// load-balancer host: it makes the kernel forward the traffic of each
// service's VIPs to the NodePorts of its healthy nodes, in the shape of
// kube-proxy's nftables mode and through sigs.k8s.io/knftables.
//
// It owns exactly three tables, "ip groundcloud", "ip6 groundcloud" and
// "netdev groundcloud", and the conntrack entries of UDP flows it forwarded. It must not read or change any
// other table, address, route or sysctl: holding VIPs, health checks and
// kernel settings belong to other packages or to the host (CheckHost only
// reports what is missing). It does not schedule: the caller decides when to
// Sync (rate limits, periodic full resyncs via ForceFullSync); the agent
// does through internal/async's Runner.
//
// The core is pure: Validate and Desired turn a State into a Ruleset (an
// in-memory model of the tables), Assign fills a service's hash buckets,
// FullSync and PartialSync write a knftables transaction from two Rulesets,
// StaleUDPFlows lists the conntrack entries to delete. Syncer is the thin
// shell that runs one transaction per family per Sync (full at start and
// after any error, otherwise only the difference from the last applied
// Ruleset), then deletes stale conntrack entries.
//
// # Ruleset
//
// Per family, kube-proxy's names and layout:
//
//   - nat-prerouting and nat-output jump to services, which dispatches on
//     "ip daddr . meta l4proto . th dport vmap @service-ports" to the chain
//     of the service port (svc-<hash>-<namespace/name>/<proto>/<port>) or,
//     for a service of a bucket group (Service.BucketGroup), to the
//     group's chain for the protocol (grp-<hash>-<group>/<proto>, with
//     "/affinity" for ClientIP affinity), which every port of the group's
//     services shares;
//   - a service port's chain DNATs to "node address . NodePort" from its
//     named bucket map (bkt-<hash>-<namespace/name>/<proto>/<port>) of
//     BucketCount elements, indexed by "jhash ip saddr . th sport mod 128
//     seed HashSeed" ("jhash ip saddr" for ClientIP affinity); a group's
//     chain DNATs to the node address from the group's map
//     (grp-<hash>-<group>), indexed by "jhash ip saddr . th sport . ip
//     daddr . th dport" (without the source port for affinity), so that a
//     client's flows to two services of the group land in unrelated
//     buckets, and to the NodePort of the service's port from node-ports
//     ("VIP . protocol . port : NodePort"). The maps are filled by Assign:
//     every LB host computes the same buckets, so a failover moves no flow.
//     The rules name the maps and never change with the backends: a node
//     that comes, goes or changes health costs the deletion and addition
//     of the elements of the buckets that move, nothing else; a service of
//     a group that comes or goes costs its elements, no chain. nft reads
//     every chain of a table before it evaluates a rule or a verdict
//     element, so chains per service would make every sync pay for the
//     whole table (BenchmarkKernelAddOneService);
//   - nat-postrouting SNATs DNATed packets to their VIP ("ct status dnat snat
//     to ct original ip daddr map @vip-snat"), so that replies come back to
//     whichever host holds the VIP;
//   - filter-prerouting (priority dstnat-10, before DNAT) drops new flows from
//     outside a service's source ranges via @firewall-ips and fw-<hash>-<name>;
//   - filter-input, -forward and -output reject new flows to service ports
//     without a healthy backend via @no-endpoint-services (TCP reset, ICMP
//     port unreachable otherwise): reject is not allowed in the nat hooks;
//   - filter-input then drops the TCP and UDP packets for a proxy VIP
//     (@proxy-vips) that no rule translated and conntrack does not know as
//     established: to a port no service has, out of their flow's window,
//     or the first packet from a node of a flow this host has no entry
//     for, as after it took the address over (its agent deleted the
//     address's entries). The host's own stack would answer those with a
//     reset or a port unreachable and kill the flow at the node; dropped,
//     the node sends it again after the client's next packet has made the
//     entry.
//
// For one service with a source range and one without a healthy backend,
// `nft list table ip groundcloud` prints (the bucket maps shortened):
//
//	table ip groundcloud {
//		comment "groundcloud load balancer: VIP forwarding, managed by groundcloud-agent"
//		map bkt-CCIP5SV6-demo/web/tcp/80 {
//			typeof numgen inc mod 2 : ip daddr . tcp dport
//			elements = { 0 : 192.0.2.11 . 30080, 1 : 192.0.2.11 . 30080, …, 127 : 192.0.2.12 . 30080 }
//		}
//
//		map bkt-TQVS6BWD-demo/dns/udp/53 {
//			typeof numgen inc mod 2 : ip daddr . udp dport
//		}
//
//		map firewall-ips {
//			type ipv4_addr . inet_proto . inet_service : verdict
//			comment "VIP . protocol . port to the chain that drops disallowed sources"
//			elements = { 192.0.2.100 . tcp . 80 : goto fw-4MKSPX4D-demo/web }
//		}
//
//		map no-endpoint-services {
//			type ipv4_addr . inet_proto . inet_service : verdict
//			comment "VIP . protocol . port of services without a healthy backend"
//			elements = { 192.0.2.100 . udp . 53 : goto reject-chain }
//		}
//
//		map proxy-vips {
//			type ipv4_addr : verdict
//			comment "VIPs forwarded in proxy mode: what no rule translated for them is dropped"
//			elements = { 192.0.2.100 : drop }
//		}
//
//		map service-ports {
//			type ipv4_addr . inet_proto . inet_service : verdict
//			comment "VIP . protocol . port to the chain that picks a backend"
//			elements = { 192.0.2.100 . udp . 53 : goto svc-TQVS6BWD-demo/dns/udp/53,
//				     192.0.2.100 . tcp . 80 : goto svc-CCIP5SV6-demo/web/tcp/80 }
//		}
//
//		map vip-snat {
//			type ipv4_addr : ipv4_addr
//			comment "VIP to the source address of packets forwarded for it"
//			elements = { 192.0.2.100 : 192.0.2.100 }
//		}
//
//		chain filter-forward {
//			type filter hook forward priority -110; policy accept;
//			ct state new jump service-endpoints-check
//		}
//
//		chain filter-input {
//			type filter hook input priority -110; policy accept;
//			ct state new jump service-endpoints-check
//			ct state invalid,new meta l4proto { tcp, udp } ip daddr vmap @proxy-vips
//		}
//
//		chain filter-output {
//			type filter hook output priority -110; policy accept;
//			ct state new jump service-endpoints-check
//			ct state new jump firewall-check
//		}
//
//		chain filter-prerouting {
//			type filter hook prerouting priority dstnat - 10; policy accept;
//			ct state new jump firewall-check
//		}
//
//		chain firewall-check {
//			ip daddr . meta l4proto . th dport vmap @firewall-ips
//		}
//
//		chain fw-4MKSPX4D-demo/web {
//			ip saddr != 198.51.100.0/24 drop
//		}
//
//		chain nat-output {
//			type nat hook output priority -100; policy accept;
//			jump services
//		}
//
//		chain nat-postrouting {
//			type nat hook postrouting priority srcnat; policy accept;
//			ct status dnat snat to ct original ip daddr map @vip-snat
//		}
//
//		chain nat-prerouting {
//			type nat hook prerouting priority dstnat; policy accept;
//			jump services
//		}
//
//		chain reject-chain {
//			reject with tcp reset
//			reject
//		}
//
//		chain service-endpoints-check {
//			ip daddr . meta l4proto . th dport vmap @no-endpoint-services
//		}
//
//		chain services {
//			ip daddr . meta l4proto . th dport vmap @service-ports
//		}
//
//		chain svc-CCIP5SV6-demo/web/tcp/80 {
//			dnat ip to jhash ip saddr . tcp sport mod 128 seed 0x67636c64 map @bkt-CCIP5SV6-demo/web/tcp/80
//		}
//
//		chain svc-TQVS6BWD-demo/dns/udp/53 {
//			dnat ip to jhash ip saddr . udp sport mod 128 seed 0x67636c64 map @bkt-TQVS6BWD-demo/dns/udp/53
//		}
//	}
//
// (nft prints "meta l4proto tcp dnat ... th sport" as "dnat ... tcp sport".)
// A service port without a healthy backend keeps its rule over an empty
// map: the lookup fails, the rule does not match, and the filter chains
// reject the flow.
//
// The bucket maps are declared "typeof numgen inc mod 2": their key is a
// jhash result, but nft 1.0.6 crashes listing a map declared "typeof jhash
// …" and refuses "type mark" for it (datatype mismatch); numgen gives the
// same 32-bit integer key. The map is per service port because its values
// carry the port's NodePort.
//
// In memory (Map.Buckets) a bucket map is not its 128 value strings but
// one byte per bucket, an index into shared choices (the node names and
// addresses of the family of one backend list), and the port's NodePort
// (a passthrough verdict map instead names the node whose buckets
// accept). A Syncer's memo makes one list of choices per distinct backend
// list and keeps each service's index per family, which the maps of the
// service's ports share; "address . NodePort" (or "goto <node chain>") is
// formatted only when an element is written: every one in a full sync,
// those of the buckets that move in a partial one, found by comparing
// addresses and ports (maps sharing index and choices are equal without
// looking). With 5,000 single-port services on 100 nodes the applied
// ruleset and the memo hold 6.0 MB, against 39.8 MB with a string per
// bucket (BenchmarkSyncerHeld5000x100).
//
// # Passthrough forwarding
//
// A service with Forwarding Passthrough is forwarded by the netdev table,
// at the ingress hook of State.Interface: before routing, netfilter's
// prerouting hooks and conntrack, so the host keeps no state for these
// flows and a failover or an ECMP spread over several hosts moves none.
//
//	table netdev groundcloud {
//		map ip-bkt-S43VMRVR-shop/web {
//			typeof numgen inc mod 2 : verdict
//			elements = { 0 : goto ip-node-MZLQ74C2-node-a, 1 : accept, … }
//		}
//		map passthrough-ports4 {
//			type ipv4_addr . inet_proto . inet_service : verdict
//			elements = { 192.0.2.100 . tcp . 80 : goto ip-svc-RG7C23E3-shop/web/tcp/80 }
//		}
//		chain ingress-eth0 {
//			type filter hook ingress device "eth0" priority filter; policy accept;
//			ip daddr . meta l4proto . th dport vmap @passthrough-ports4
//			ip6 daddr . meta l4proto . th dport vmap @passthrough-ports6
//		}
//		chain ip-svc-RG7C23E3-shop/web/tcp/80 {
//			ip saddr != 198.51.100.0/24 drop
//			jhash ip saddr . th sport mod 128 seed 0x67636c64 vmap @ip-bkt-S43VMRVR-shop/web
//		}
//		chain ip-node-MZLQ74C2-node-a {
//			fwd ip to 192.0.2.11 device "eth0"
//		}
//	}
//
// The bucket is the same as proxy mode's (same jhash, seed and Assign), so
// proxy and passthrough hosts agree on each flow's node. "fwd ip to" sends
// the packet unchanged (client source, VIP destination) to the node's
// link-layer address, resolving it through the neighbour table; the node's
// kube-proxy DNATs the VIP (Service status ipMode VIP) and its reply goes
// from the VIP straight to the client. Buckets of the host's own node
// (State.Self) accept: the packet goes up this host's stack, where its own
// kube-proxy serves the VIP. ForNewFlows does not apply: no DNAT of ours
// comes first. A node whose address is in none of State.Links (the
// interface's prefixes) cannot be reached by fwd: it is treated as
// unhealthy in that family and reported by Validate, so its flows go to
// other nodes rather than into a black hole.
//
// The ip and ip6 tables do the rest for passthrough services: they drop
// sources outside the ranges and, while no node is reachable (the netdev
// table then has no element for the frontend, so packets go up the stack to
// the VIP, a local address), reject new flows with a TCP reset or ICMP port
// unreachable, as in proxy mode. They never DNAT passthrough frontends.
//
// The bucket map is per service and family, shared by the service's ports:
// their buckets and verdicts are the same (the node chains carry no port).
//
// Why a vmap to one chain per node rather than "fwd ip to jhash … map { 0 :
// addr, … } device X" (both run on nft 1.0.6 and this kernel): the vmap
// gives the buckets of State.Self their "accept" in the same lookup (the
// map form needs a second jhash rule before it with a set of those
// buckets), and a node's address lives in one chain shared by every service,
// so a new address rewrites one chain instead of every service port.
// Per packet both do one jhash and one map lookup; the vmap adds a goto.
// Measured with 1,000 service ports of 128 buckets over 8 nodes: the vmap
// ruleset is 2.8 MB of nft text against 2.3 MB, loads in 1.2-2.4 s against
// 1.2-1.8 s (noisy host) and takes 130 MB of nft's memory against 108 MB.
//
// What passthrough needs of the host and the network:
//
//   - the nodes on a link of Interface (same subnet), see Links;
//   - no ICMP redirects from Interface: fwd bypasses routing, so the kernel
//     sends none for these packets, but set
//     net.ipv4.conf.<Interface>.send_redirects=0 (and .all) anyway for the
//     packets that do go up the stack; the agent's deployment sets it;
//   - the same MTU on the path: ICMP errors about a flow (fragmentation
//     needed, packet too big) are addressed to the VIP and reach this host,
//     which does not forward them to the node serving the flow; a node's
//     reply larger than a hop's MTU is then lost (clamp the MSS on the
//     router when the client side has a smaller MTU). Non-first IP
//     fragments carry no ports and are not forwarded either;
//   - no forwarding sysctl: fwd does not route.
//
// For ECMP over several hosts (BGP), nothing here depends on which host
// receives a flow's packets: every host computes the same table from the
// same State. The ingress hook and fwd both use Interface; a host that
// receives from a router on one interface and reaches nodes on another
// needs the base chain on the receiving one (a netdev chain takes one
// device in nft 1.0.6) and fwd on the nodes' one, which is where
// ingressChainName and the device of the node chains would split.
//
// With no state, the bucket of an established flow moves when its node
// turns unhealthy (or off-link); the node it moves to answers with a TCP
// reset. Proxy mode keeps such flows on their node through conntrack.
//
// # Conntrack clean-up
//
// Two kinds of conntrack entries are deleted: those of UDP flows whose
// backend left (StaleUDPFlows, after each Sync) and, when this host takes
// addresses over, every entry of those addresses (the agent, through
// NetlinkConntrack.DeleteFlowsTo, before it adds them). Neither may copy
// the table into user space: the kernel picks the entries (ctnetlink.go).
//
// Each deletion dumps the table with a CTA_FILTER (Linux 5.8 and later),
// which makes the kernel send only the entries whose original and reply
// tuples have the filter's fields; those are matched again here (a kernel
// that ignores the filter sends all) and deleted one request each. One
// dump per filter, up to maxWalks of them; more filters (a host taking
// over many addresses at once) make one dump with what they share, which
// may send the whole table of that family, as the old way always did. IPv6
// filters reach the kernel without their addresses: Linux compares the
// IPv6 addresses of a filter the wrong way round
// (ctnetlink_filter_match_tuple skips an entry when !ipv6_addr_cmp, that
// is when its address equals the filter's; seen on 6.18, where a delete
// filtered on one IPv6 address deleted the entries of every other one), so
// for IPv6 the kernel filters by protocol and ports and addresses are
// compared here.
//
// Measured (TestKernelConntrackDeleteUDPFlows, docs/benchmarks.md): with
// 50,000 entries one deletion allocated 16-26 kB where vishvananda/netlink's
// ConntrackDeleteFilters, which dumped the whole table and matched in user
// space, allocated 44.7 MB; with 250,000 entries deleting one address's
// entries took about 0.1 s against 1.7 s. The kernel still walks its whole
// table for each dump, so the cost still grows with it, by about 0.3 µs an
// entry here.
//
// Considered and not taken: a delete request carrying the filter (Linux
// 6.11 and later), which sends nothing back, was slower on a busy host:
// its walk holds the conntrack mutex, shared with the teardown of every
// network namespace, and yields the CPU between hash buckets; during
// failovers with 250,000 entries it took 0.3 to 14 s where the filtered
// dump took 0.08 to 0.34 s. Marks or zones also filter in the kernel, but
// our rules would have to set a mark naming a flow's address and backend,
// which 32 bits cannot; the tuple filter names exactly the entries.
//
// A failed clean-up does not fail the Sync: the tables forward the new
// State whatever conntrack holds. Sync reports it in Result.CleanupErr
// and retries those flows on each later Sync.
//
// # Known limits
//
//   - Packets to a VIP on a port or protocol no service uses are not touched:
//     they reach the LB host's own stack like any local address.
//   - A new or refilled bucket map's elements are written as one list,
//     "add element ... { 0 : a, 1 : b, ... }" (Syncer.BatchBucketElements;
//     knftables writes one command per Element and nft 1.0.6 spends about
//     25 µs on each command, much less per element of a list): a full sync
//     of 1,000 single-port services (128,000 elements) takes about 0.8 s
//     against 3.7 s one command per element (nft -f in a namespace). The
//     elements of buckets that move after a node or health change are
//     deleted and added one command each: a few per service.
//   - Passthrough on a dedicated host (not a Node) serves no client on that
//     host itself: locally sent packets skip the ingress hook.
//   - Map types and base-chain hooks are constants; changing one in a later
//     version needs the table deleted once (Cleanup), since nft cannot
//     change them in place.
package dataplane

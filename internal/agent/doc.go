// Package agent is groundcloud-agent: it runs on a load-balancer host,
// watches LoadBalancer objects and the Nodes (every LoadBalancer's backends
// are the Nodes internal/backends accepts; a Node informer trimmed by
// backends.Transform), health-checks those nodes, programs the nftables
// data plane (internal/dataplane), holds the virtual IPs it owns
// (internal/layer2) and reports in the objects' status.
//
// translate.go is pure (objects + nodes + health -> data plane state, probe targets,
// addresses to hold, status); agent.go is the loop that talks to the
// apiserver and the kernel; ownership.go builds the Owner --vip-ownership
// asks for and connects the agent to internal/membership when several
// agents share the addresses; cloudconfig.go reads what the agent uses of
// the cloud-config ([BGPPeer], [Routes]) and goes on with the parts it can
// use when the file has problems; sessions.go tells membership which BGP
// sessions are established, as only a host with one may be elected for a
// proxy BGP address; metrics_traffic.go exports the data plane's traffic
// counters at each scrape of /metrics (--traffic-counters), never in
// status. The agent keeps forwarding with its last known
// state while the apiserver is unreachable. It must never touch nftables
// tables or addresses it did not create.
//
// # Stopping
//
// stop.go decides what a stopping agent leaves behind. It hands over the
// addresses another Ready host would hold (membership's Successor): it
// leaves the gossip, then removes them. The addresses no other host would
// hold it leaves on the interface, with the nftables ruleset and
// conntrack, for the agent that starts next, unless it stops for good
// (Config.ForGood; forgood.go: its DaemonSet gone, being deleted or
// unreadable for lack of rights, its Node gone or no longer selected);
// then, or when every address moves, it removes everything as an
// uninstall must. A starting agent adopts what its predecessor left (the
// addresses carrying the layer2 mark): it holds them until membership
// makes it Ready or another host would hold them, keeps their conntrack
// entries, and its first sync replaces the ruleset in one transaction.
// BGP routes are still withdrawn on every stop.
package agent

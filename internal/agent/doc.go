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
// proxy BGP address. The agent keeps forwarding with its last known
// state while the apiserver is unreachable. It must never touch nftables
// tables or addresses it did not create.
package agent

package annotation

// LoadBalancerHostLabel, with the value "true" on a Node, makes it a
// load-balancer host: the agent's DaemonSet selects it (its nodeSelector in
// deploy/agent/daemonset.yaml, the chart's agent.nodeSelector). A
// dedicated host also carries a NoSchedule taint of the same key, which
// the agent tolerates (docs/install.md). The binaries do not read it; the
// DaemonSet's scheduling does.
const LoadBalancerHostLabel = "groundcloud.io/load-balancer"

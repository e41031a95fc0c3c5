package annotation

// LoadBalancerHostLabel, with the value "true" on a Node, makes it a
// load-balancer host: the agent's DaemonSet selects it (its nodeSelector in
// deploy/agent/daemonset.yaml, the chart's agent.nodeSelector). The key is
// under node-restriction.kubernetes.io/, which the NodeRestriction
// admission plugin keeps kubelets from setting on their own Nodes, at
// registration or after: an administrator labels a host, and a node cannot
// label itself to have the agent, and with it the gossip key, scheduled on
// it. The binaries do not read it; the DaemonSet's scheduling does.
//
// It replaced groundcloud.io/load-balancer, which kubelets may set;
// docs/install.md says how to upgrade.
const LoadBalancerHostLabel = "node-restriction.kubernetes.io/groundcloud-load-balancer"

// LoadBalancerHostTaint, as a NoSchedule taint with the value "true", keeps
// other Pods off a dedicated load-balancer host; the agent tolerates it
// (docs/install.md). A taint only keeps Pods away, so a node that set it
// could draw nothing to itself (and NodeRestriction lets a kubelet set its
// taints only when it registers its Node).
const LoadBalancerHostTaint = "groundcloud.io/load-balancer"

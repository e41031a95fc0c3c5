// Package realcluster starts a real Kubernetes cluster on one machine, with
// groundcloud installed in it as a user installs it: the cluster of the
// sandbox (cmd/groundcloud-sandbox), test/cluster and test/bench. Like kind, but the
// nodes are network namespaces (test/framework/netlab) instead of containers.
//
//   - Control plane (test/framework/controlplane): etcd, kube-apiserver,
//     kube-controller-manager (node-ipam over ClusterCIDR, --cloud-provider=
//     external) and kube-scheduler, on the machine's 127.0.0.1. Nodes and
//     Pods reach the apiserver at an address every node has on its loopback
//     (Options.APIServerAddress), relayed by this process; the apiserver
//     advertises it, so it is the kubernetes Service's endpoint. What the
//     apiserver opens towards the cluster (kubectl exec and logs to a
//     kubelet, the proxy subresources) goes through its egress selector to
//     a proxy of this process that dials from inside the lab (egress.go).
//   - Nodes: a lab host each, running containerd and a kubelet
//     --cloud-provider=external in its network namespace and in a mount
//     namespace of its own (tmpfs over /run, /var/lib and /var/log, which
//     kubelet and containerd's shims use whatever they are told), with
//     cgroups under /groundcloud.<lab prefix>/<node>; the reference bridge
//     CNI plugin on the pod CIDRs node-ipam gave the Node; kube-proxy in
//     nftables mode as a DaemonSet; cluster DNS (CoreDNS, from the tools
//     module, as Deployment coredns behind Service kube-dns, which every
//     kubelet's clusterDNS names). Start and Join return once every
//     kube-proxy has synced its rules (its metrics say so; its Pod is
//     Ready before that). Nodes that are API objects only (a benchmark's)
//     may join them: the test bed waits for the DaemonSets' Pods on its
//     own nodes only.
//   - Images (test/framework/imagebuild): groundcloud's, from deploy/images/, and the
//     test bed's own (pause, kube-proxy, CoreDNS, the groundcloud-echo
//     example application), imported into every node's containerd; on
//     request the image of Kubernetes' e2e suite (BuildAgnhost, ImportAs).
//     Nothing is pulled.
//   - groundcloud: the cloud-config and gossip-key Secrets, then deploy/
//     and deploy/router/ through a kustomize overlay that only points the
//     images at the local ones and sets the lab's interface: the controller
//     manager as its Deployment on the Pod network, the agents as their
//     DaemonSet on the load-balancer hosts (Nodes labelled
//     node-restriction.kubernetes.io/groundcloud-load-balancer=true by the
//     administrator once they registered, as a kubelet may not set it),
//     the routers on every Node. Options.Repo is the checkout installed
//     (an earlier commit's tree, ExportCommit, installs a previous
//     release); Cluster.Install installs another Release (BuildRelease)
//     over it as a user upgrades or downgrades: its images on every node,
//     the hosts labelled with the key its agents select, its deploy/
//     applied, the rollouts awaited. The agents' host label is read from
//     the installed DaemonSet's nodeSelector (Cluster.HostLabel).
//
// Failures a test can cause: a node's cable pulled (Node.SetLink, which
// also cuts its way to the apiserver), a container crashing
// (Node.KillContainer), a kubelet that hangs and so restarts nothing
// (Node.SetKubeletPaused), the apiserver stopped (CP.StopAPIServer), a
// worker joining (Cluster.Join) or retired (Cluster.Leave).
//
// It owns: the order of starting and stopping all of it, the nodes' state
// directories, mount namespaces and cgroups, and the machine-wide settings
// kubelets change (recorded before the first, put back on Close; see
// globalSysctls). One cluster runs on a machine at a time (a lock in /run,
// HostLock; a benchmark that raises a global limit for a while takes it
// too, and records the value it found with the same SysctlRecord).
//
// It must not: change the root network namespace (the sandbox's root link
// is the one exception, asked for by Options.RootLink); leave a process,
// mount, cgroup, namespace or changed setting behind after Close; pull an
// image; stop a component by a host process of the test bed's when a test
// means the component's container (Node.KillContainer does that).
package realcluster

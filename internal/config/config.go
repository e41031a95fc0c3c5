package config

import (
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Config is a parsed and validated cloud-config. It is read-only: callers
// must not change it, so that it can be shared.
type Config struct {
	Global   Global
	Machines map[string]*Machine // by machine name (the section name, case preserved)
	Pools    []*Pool             // in file order: the first auto-assign pool wins
	Routes   Routes              // the zero value (off) without a [Routes] section
	BGPPeers []*BGPPeer          // in file order
}

// Global is the [Global] section.
type Global struct {
	Region                 string // never empty
	AuthoritativeInventory bool   // the [Machine] sections list every machine
	// ClusterHealthCheck is how agents probe the nodes of Services with
	// externalTrafficPolicy Cluster.
	ClusterHealthCheck ClusterHealthCheck
	// AllowNodeSetLabels lets the pools' and BGP peers' host selectors
	// select on label keys a Node's kubelet may set on its own Node
	// (hostselector.go).
	AllowNodeSetLabels bool
	// BMCOutOfService and BMCOutOfServiceGrace are the bmc-out-of-service
	// keys (outofservice.go).
	BMCOutOfService      OutOfService
	BMCOutOfServiceGrace time.Duration
	// BMCFence and BMCFenceAfter are the bmc-fence keys (outofservice.go).
	BMCFence      Fence
	BMCFenceAfter time.Duration
	// BMCMetadata writes the BMCs' model, serial number and BIOS version
	// on the Nodes (bmc-metadata, outofservice.go).
	BMCMetadata bool
}

// HealthCheckKind is how agents probe a node for externalTrafficPolicy
// Cluster.
type HealthCheckKind string

const (
	// HealthCheckHTTP: HTTP GET of ClusterHealthCheck.Port and .Path
	// (kube-proxy's :10256/healthz by default); healthy on 200.
	HealthCheckHTTP HealthCheckKind = "http"
	// HealthCheckTCPNodePort: a TCP connection to the Service's first TCP
	// NodePort; healthy when it is accepted.
	HealthCheckTCPNodePort HealthCheckKind = "tcp-node-port"
)

// ClusterHealthCheck is the [Global] cluster-health-check keys.
type ClusterHealthCheck struct {
	Kind HealthCheckKind
	Port int32  // HTTP only
	Path string // HTTP only; starts with /
}

// MachineState is what the cloud-node controllers are told about a machine.
type MachineState string

const (
	StateRunning  MachineState = "running"  // the machine exists and runs
	StateShutdown MachineState = "shutdown" // the machine exists but is powered off
	StateGone     MachineState = "gone"     // the machine no longer exists; its Node may be deleted
)

// Machine is a [Machine "name"] section.
type Machine struct {
	Name         string // the section name, which is the Node name
	Zone         string // empty if not given
	Region       string // defaults to Global.Region
	InstanceType string // empty if not given
	Addresses    []corev1.NodeAddress
	Labels       map[string]string // nil if none
	State        MachineState
	// BMC is the machine's baseboard management controller; nil without
	// bmc-url.
	BMC *BMC
	// OutOfService is the machine's bmc-out-of-service; "" means
	// [Global]'s (see Config.OutOfServiceOf).
	OutOfService OutOfService
	// Fence is the machine's bmc-fence; "" means [Global]'s (see
	// Config.FenceOf).
	Fence Fence
}

// Pool is a [Pool "name"] section.
type Pool struct {
	Name       string
	Ranges     []AddrRange // in file order; none overlaps another range of any pool
	Namespaces []string    // empty: every namespace may use the pool
	AutoAssign bool
	// AllowCrossNamespaceSharing lets Services of different namespaces
	// share an address of the pool under one sharing key; otherwise a
	// sharing key joins only Services of one namespace.
	AllowCrossNamespaceSharing bool
	// Forwarding is how load-balancer hosts hand the pool's traffic to
	// nodes.
	Forwarding Forwarding
	// AddressConflict is what happens to a Service whose address the
	// agents find in use by a station which is no load-balancer host.
	AddressConflict AddressConflict
	// Announce is how the pool's addresses are made known (bgp.go).
	Announce Announce
	// Hosts selects the load-balancer hosts that serve the pool; never nil
	// (labels.Everything when not given).
	Hosts labels.Selector
	// Communities and LocalPreference are attributes of the pool's BGP
	// routes (nil LocalPreference: not sent).
	Communities     []Community
	LocalPreference *uint32
}

// Forwarding is how load-balancer hosts hand a pool's traffic to nodes.
type Forwarding string

const (
	// ForwardingPassthrough forwards packets unchanged to a node on a
	// shared link; the node replies straight to the client (ipMode VIP).
	ForwardingPassthrough Forwarding = "passthrough"
	// ForwardingProxy DNATs to a node's NodePort and SNATs to the VIP;
	// replies cross the load-balancer host (ipMode Proxy).
	ForwardingProxy Forwarding = "proxy"
)

// AddressConflict is what happens to a Service of a pool whose address
// the agents find in use on the link by a station which is no
// load-balancer host.
type AddressConflict string

const (
	// AddressConflictKeep: the Service keeps the address, unannounced
	// while the conflict lasts, and the conflict is reported.
	AddressConflictKeep AddressConflict = "keep"
	// AddressConflictMove: a Service that did not ask for the address is
	// given a free one of its pool instead.
	AddressConflictMove AddressConflict = "move"
)

// Routes is the [Routes] section.
type Routes struct {
	Enabled bool // the provider offers the Routes interface
	// NodeRouters: groundcloud-router runs on every Node, which is a
	// load-balancer backend only once its router reports its routes.
	NodeRouters bool
}

// WaitForNodeRouters reports whether a Node is a load-balancer backend only
// once groundcloud-router on it reports its routes: pod routes are on and
// routers run on the Nodes.
func (r Routes) WaitForNodeRouters() bool { return r.Enabled && r.NodeRouters }

// Machine returns the machine of the given name.
func (c *Config) Machine(name string) (*Machine, bool) {
	m, ok := c.Machines[name]
	return m, ok
}

// Pool returns the pool of the given name.
func (c *Config) Pool(name string) (*Pool, bool) {
	for _, p := range c.Pools {
		if p.Name == name {
			return p, true
		}
	}
	return nil, false
}

// Contains reports whether a lies in one of the pool's ranges.
func (p *Pool) Contains(a netip.Addr) bool {
	return slices.ContainsFunc(p.Ranges, func(r AddrRange) bool { return r.Contains(a) })
}

// AllowsNamespace reports whether Services in namespace ns may use the pool.
func (p *Pool) AllowsNamespace(ns string) bool {
	return len(p.Namespaces) == 0 || slices.Contains(p.Namespaces, ns)
}

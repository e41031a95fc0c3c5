package apionly

import (
	"errors"
	"fmt"
	"time"

	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

// Binaries are our programs, as built by `go build ./cmd/...`.
type Binaries struct {
	ControllerManager, Agent, NodeSim string
}

// NodeSim says what every simulated node serves.
type NodeSim struct {
	TCPPorts, UDPPorts, HTTPPorts, HealthPorts []uint16
}

// Options configure an environment. Zero values take the defaults noted.
type Options struct {
	// Dir holds configs and logs; required.
	Dir string
	// ToolsDir holds kube-apiserver, etcd and kubectl (controlplane.ToolsDir).
	ToolsDir string
	Binaries Binaries

	// Topology: the lab, its load-balancer hosts, clients and pool
	// ranges, and the optional root link.
	netlab.Topology

	// Nodes (default 3) are the simulated nodes, named node-N.
	Nodes int
	// Unregistered is how many of the Nodes (the last ones) Start leaves
	// unregistered: their hosts run nodesim and the inventory lists them,
	// but no Node object exists until the caller registers it (RegisterNode).
	Unregistered int
	// Unlisted names nodes the cloud-config inventory leaves out: the
	// controller manager initialises them from what they report.
	Unlisted []string
	NodeSim  NodeSim

	// ExtraCloudConfig is appended to the cloud-config (more pools, say).
	ExtraCloudConfig string
	// ServiceCIDR of the apiserver (default dual-stack 10.96.0.0/16 and
	// fd00:10:96::/112).
	ServiceCIDR string
	// ExtraAPIServerArgs are added to kube-apiserver's flags (see
	// controlplane.Options.ExtraAPIServerArgs), e.g. a wider
	// --service-node-port-range.
	ExtraAPIServerArgs []string
	// AdminIdentity runs the components as test users in system:masters
	// instead of as their own ServiceAccounts bound by deploy/'s RBAC.
	AdminIdentity bool

	// HealthInterval and HealthTimeout of the agents (default 300ms, 250ms).
	HealthInterval, HealthTimeout time.Duration
	// ExtraAgentArgs and ExtraCCMArgs are appended to the flags.
	ExtraAgentArgs, ExtraCCMArgs []string
	// AgentArgs, when set, returns more flags for the agent of LB host i,
	// appended after ExtraAgentArgs (the hosts exist when it is called).
	AgentArgs func(e *Env, i int) []string

	// Logf receives progress lines (default: none).
	Logf func(format string, args ...any)
}

func (o Options) withDefaults() Options {
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	o.Topology = o.Topology.WithDefaults()
	if o.ServiceCIDR == "" {
		o.ServiceCIDR = "10.96.0.0/16,fd00:10:96::/112"
	}
	if o.HealthInterval == 0 {
		o.HealthInterval = 300 * time.Millisecond
	}
	if o.HealthTimeout == 0 {
		o.HealthTimeout = 250 * time.Millisecond
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return o
}

// Validate reports every problem at once.
func (o Options) Validate() error {
	var errs []error
	if o.Dir == "" {
		errs = append(errs, errors.New("Dir is required"))
	}
	if o.ToolsDir == "" {
		errs = append(errs, errors.New("ToolsDir is required"))
	}
	if o.Binaries.ControllerManager == "" || o.Binaries.Agent == "" || o.Binaries.NodeSim == "" {
		errs = append(errs, errors.New("Binaries: every binary is required"))
	}
	if o.Nodes < 0 || o.Nodes > 50 {
		errs = append(errs, fmt.Errorf("Nodes %d: want 1 to 50", o.Nodes))
	}
	if o.Unregistered < 0 || o.Unregistered >= o.Nodes {
		errs = append(errs, fmt.Errorf("Unregistered %d: want 0 to Nodes-1 (%d)", o.Unregistered, o.Nodes-1))
	}
	if o.LBHosts < 0 || o.LBHosts > 8 {
		errs = append(errs, fmt.Errorf("LBHosts %d: want 1 to 8", o.LBHosts))
	}
	if !o.Subnet4.Addr().Is4() || o.Subnet4.Bits() > 24 {
		errs = append(errs, fmt.Errorf("Subnet4 %s: want an IPv4 /24 or larger", o.Subnet4))
	}
	if !o.Subnet6.Addr().Is6() || o.Subnet6.Bits() > 120 {
		errs = append(errs, fmt.Errorf("Subnet6 %s: want an IPv6 /120 or larger", o.Subnet6))
	}
	return errors.Join(errs...)
}

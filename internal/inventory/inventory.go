package inventory

import (
	"errors"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/groundcloud/groundcloud/internal/config"
)

// ProviderName is the name groundcloud registers with the upstream
// cloud-provider library and the scheme of its provider IDs.
const ProviderName = "groundcloud"

const providerIDPrefix = ProviderName + "://"

// ErrMachineGone is returned by Metadata for a machine whose state is gone:
// such a machine must not be initialised as a Node.
var ErrMachineGone = errors.New("machine is gone")

// ProviderID returns the provider ID of a machine: groundcloud://<region>/<name>.
func ProviderID(region, machine string) string {
	return providerIDPrefix + region + "/" + machine
}

// ParseProviderID splits a groundcloud provider ID into region and machine
// name. ok is false when id is not a well-formed groundcloud provider ID.
func ParseProviderID(id string) (region, machine string, ok bool) {
	rest, found := strings.CutPrefix(id, providerIDPrefix)
	if !found {
		return "", "", false
	}
	region, machine, found = strings.Cut(rest, "/")
	if !found || region == "" || machine == "" || strings.Contains(machine, "/") {
		return "", "", false
	}
	return region, machine, true
}

// MatchKind says how a Node was matched to a machine.
type MatchKind int

const (
	// NoMatch: no machine of the inventory is this Node's.
	NoMatch MatchKind = iota
	// ByProviderID: the Node's spec.providerID names the machine.
	ByProviderID
	// ByName: the Node has no (matching) providerID; a machine has its name.
	ByName
)

// Match is the result of looking a Node up in the inventory.
type Match struct {
	Machine *config.Machine // nil when Kind is NoMatch
	Kind    MatchKind
	// Foreign is true when the Node's providerID belongs to another provider.
	Foreign bool
}

// Lookup finds the machine of node: by providerID first, then by node name.
func Lookup(cfg *config.Config, node *v1.Node) Match {
	if id := node.Spec.ProviderID; id != "" {
		region, name, ok := ParseProviderID(id)
		if !ok {
			return Match{Kind: NoMatch, Foreign: !strings.HasPrefix(id, providerIDPrefix)}
		}
		if m, found := cfg.Machine(name); found && m.Region == region {
			return Match{Machine: m, Kind: ByProviderID}
		}
	}
	if m, found := cfg.Machine(node.Name); found {
		return Match{Machine: m, Kind: ByName}
	}
	return Match{Kind: NoMatch}
}

// Exists reports whether node's machine exists. It is false only when the
// inventory says definitively that the machine is gone: its state is gone,
// or the inventory declares itself authoritative, lists at least one machine,
// and does not list this one. Everything else — a non-authoritative
// inventory, an empty one, a providerID of another provider — counts as
// existing, because the caller deletes the Node on false.
func Exists(cfg *config.Config, node *v1.Node) bool {
	m := Lookup(cfg, node)
	switch {
	case m.Machine != nil:
		return m.Machine.State != config.StateGone
	case m.Foreign:
		return true
	default:
		return !(cfg.Global.AuthoritativeInventory && len(cfg.Machines) > 0)
	}
}

// Shutdown reports whether node's machine is declared shut down.
func Shutdown(cfg *config.Config, node *v1.Node) bool {
	m := Lookup(cfg, node)
	return m.Machine != nil && m.Machine.State == config.StateShutdown
}

// Metadata returns what the cloud-node controller writes onto node.
//
// A machine of the inventory gives its provider ID, addresses, zone, region,
// instance type and extra labels. A Node the inventory does not list gets a
// provider ID from its name and keeps the addresses it reported, without
// labels — unless the inventory is authoritative, when it is an error
// wrapping cloudprovider.InstanceNotFound and the Node stays uninitialised.
func Metadata(cfg *config.Config, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	m := Lookup(cfg, node)
	switch {
	case m.Machine != nil && m.Machine.State == config.StateGone:
		return nil, fmt.Errorf("node %q: machine %q: %w", node.Name, m.Machine.Name, ErrMachineGone)
	case m.Machine != nil:
		return machineMetadata(m.Machine), nil
	case m.Foreign:
		return nil, fmt.Errorf("node %q has providerID %q of another cloud provider", node.Name, node.Spec.ProviderID)
	case cfg.Global.AuthoritativeInventory && len(cfg.Machines) > 0:
		return nil, fmt.Errorf("node %q is not in the authoritative inventory: %w", node.Name, cloudprovider.InstanceNotFound)
	default:
		return &cloudprovider.InstanceMetadata{
			ProviderID:    ProviderID(cfg.Global.Region, node.Name),
			NodeAddresses: append([]v1.NodeAddress(nil), node.Status.Addresses...),
		}, nil
	}
}

func machineMetadata(m *config.Machine) *cloudprovider.InstanceMetadata {
	md := &cloudprovider.InstanceMetadata{
		ProviderID:    ProviderID(m.Region, m.Name),
		InstanceType:  m.InstanceType,
		NodeAddresses: append([]v1.NodeAddress(nil), m.Addresses...),
		Zone:          m.Zone,
		Region:        m.Region,
	}
	if len(m.Labels) > 0 {
		md.AdditionalLabels = make(map[string]string, len(m.Labels))
		for k, v := range m.Labels {
			md.AdditionalLabels[k] = v
		}
	}
	return md
}

package inventory

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/groundcloud/groundcloud/internal/config"
)

func newNode(name string, mods ...func(*v1.Node)) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, m := range mods {
		m(n)
	}
	return n
}

func withProviderID(id string) func(*v1.Node) {
	return func(n *v1.Node) { n.Spec.ProviderID = id }
}

func withAddress(t v1.NodeAddressType, a string) func(*v1.Node) {
	return func(n *v1.Node) { n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: t, Address: a}) }
}

func newConfig(authoritative bool, machines ...*config.Machine) *config.Config {
	c := &config.Config{
		Global:   config.Global{Region: "home", AuthoritativeInventory: authoritative},
		Machines: map[string]*config.Machine{},
	}
	for _, m := range machines {
		c.Machines[m.Name] = m
	}
	return c
}

func machine(name string, state config.MachineState) *config.Machine {
	return &config.Machine{
		Name: name, Region: "home", Zone: "rack-1", InstanceType: "nuc",
		Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.10"}},
		Labels:    map[string]string{"example.com/shelf": "top"},
		State:     state,
	}
}

func TestProviderID(t *testing.T) {
	id := ProviderID("home", "web-1")
	if id != "groundcloud://home/web-1" {
		t.Fatalf("ProviderID = %q", id)
	}
	region, name, ok := ParseProviderID(id)
	if !ok || region != "home" || name != "web-1" {
		t.Fatalf("ParseProviderID(%q) = %q, %q, %v", id, region, name, ok)
	}
	for _, bad := range []string{"", "groundcloud://", "groundcloud://home", "groundcloud://home/", "groundcloud:///web", "aws://home/web", "groundcloud://a/b/c"} {
		if _, _, ok := ParseProviderID(bad); ok {
			t.Errorf("ParseProviderID(%q) accepted", bad)
		}
	}
}

func TestLookup(t *testing.T) {
	cfg := newConfig(false, machine("web-1", config.StateRunning), machine("web-2", config.StateRunning))
	tests := []struct {
		name        string
		node        *v1.Node
		wantMachine string
		wantKind    MatchKind
		wantForeign bool
	}{
		{name: "by name", node: newNode("web-1"), wantMachine: "web-1", wantKind: ByName},
		{name: "providerID wins over name", node: newNode("web-1", withProviderID("groundcloud://home/web-2")), wantMachine: "web-2", wantKind: ByProviderID},
		{name: "providerID of other region falls back to name", node: newNode("web-1", withProviderID("groundcloud://away/web-2")), wantMachine: "web-1", wantKind: ByName},
		{name: "unknown", node: newNode("db-1"), wantKind: NoMatch},
		{name: "foreign providerID", node: newNode("web-1", withProviderID("aws:///eu-west-1a/i-1")), wantKind: NoMatch, wantForeign: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := Lookup(cfg, tt.node)
			got := ""
			if m.Machine != nil {
				got = m.Machine.Name
			}
			if got != tt.wantMachine || m.Kind != tt.wantKind || m.Foreign != tt.wantForeign {
				t.Errorf("Lookup = (%q, %v, foreign %v), want (%q, %v, foreign %v)", got, m.Kind, m.Foreign, tt.wantMachine, tt.wantKind, tt.wantForeign)
			}
		})
	}
}

func TestExistsAndShutdown(t *testing.T) {
	tests := []struct {
		name         string
		cfg          *config.Config
		node         *v1.Node
		wantExists   bool
		wantShutdown bool
	}{
		{name: "running", cfg: newConfig(true, machine("a", config.StateRunning)), node: newNode("a"), wantExists: true},
		{name: "shutdown exists", cfg: newConfig(true, machine("a", config.StateShutdown)), node: newNode("a"), wantExists: true, wantShutdown: true},
		{name: "gone", cfg: newConfig(false, machine("a", config.StateGone)), node: newNode("a"), wantExists: false},
		{name: "gone by providerID", cfg: newConfig(false, machine("a", config.StateGone)), node: newNode("other", withProviderID("groundcloud://home/a")), wantExists: false},
		{name: "absent from authoritative inventory", cfg: newConfig(true, machine("a", config.StateRunning)), node: newNode("b"), wantExists: false},
		{name: "absent from non-authoritative inventory", cfg: newConfig(false, machine("a", config.StateRunning)), node: newNode("b"), wantExists: true},
		{name: "empty authoritative inventory deletes nothing", cfg: newConfig(true), node: newNode("b"), wantExists: true},
		{name: "foreign providerID in authoritative inventory", cfg: newConfig(true, machine("a", config.StateRunning)), node: newNode("b", withProviderID("other://x")), wantExists: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Exists(tt.cfg, tt.node); got != tt.wantExists {
				t.Errorf("Exists = %v, want %v", got, tt.wantExists)
			}
			if got := Shutdown(tt.cfg, tt.node); got != tt.wantShutdown {
				t.Errorf("Shutdown = %v, want %v", got, tt.wantShutdown)
			}
		})
	}
}

func TestMetadata(t *testing.T) {
	kubeletAddr := withAddress(v1.NodeInternalIP, "198.51.100.7")
	tests := []struct {
		name    string
		cfg     *config.Config
		node    *v1.Node
		want    *cloudprovider.InstanceMetadata
		wantErr error
	}{
		{
			name: "known machine",
			cfg:  newConfig(false, machine("a", config.StateRunning)),
			node: newNode("a", kubeletAddr),
			want: &cloudprovider.InstanceMetadata{
				ProviderID:       "groundcloud://home/a",
				InstanceType:     "nuc",
				NodeAddresses:    []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.10"}},
				Zone:             "rack-1",
				Region:           "home",
				AdditionalLabels: map[string]string{"example.com/shelf": "top"},
			},
		},
		{
			name: "unknown machine in non-authoritative inventory keeps its addresses",
			cfg:  newConfig(false, machine("a", config.StateRunning)),
			node: newNode("b", kubeletAddr),
			want: &cloudprovider.InstanceMetadata{
				ProviderID:    "groundcloud://home/b",
				NodeAddresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "198.51.100.7"}},
			},
		},
		{name: "unknown machine in authoritative inventory", cfg: newConfig(true, machine("a", config.StateRunning)), node: newNode("b"), wantErr: cloudprovider.InstanceNotFound},
		{name: "gone machine", cfg: newConfig(false, machine("a", config.StateGone)), node: newNode("a"), wantErr: ErrMachineGone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Metadata(tt.cfg, tt.node)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Metadata error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Metadata: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Metadata (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMetadataDoesNotAlias(t *testing.T) {
	m := machine("a", config.StateRunning)
	cfg := newConfig(false, m)
	md, err := Metadata(cfg, newNode("a"))
	if err != nil {
		t.Fatal(err)
	}
	md.NodeAddresses[0].Address = "changed"
	md.AdditionalLabels["example.com/shelf"] = "changed"
	if m.Addresses[0].Address != "192.0.2.10" || m.Labels["example.com/shelf"] != "top" {
		t.Fatalf("Metadata result aliases the read-only configuration")
	}
}

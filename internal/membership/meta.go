package membership

import (
	"encoding/json"
	"fmt"
)

// metaVersion is the version of the metadata layout.
const metaVersion = 1

// meta is what a member publishes about itself in its gossip node metadata
// (memberlist limits it to 512 bytes).
type meta struct {
	Version int    `json:"v"`
	State   State  `json:"state"`
	MAC     string `json:"mac,omitempty"`
	// Groups are the host groups the member belongs to (groups.go); always
	// written, so that none ([]) differs from an older member's every (absent).
	Groups []string `json:"g"`
	// BGP are the address families it may advertise (encodeFamilies);
	// always written, so that none ("") differs from an older member's
	// every (absent).
	BGP *string `json:"b"`
	// Sessions are the address families of its established BGP sessions
	// (encodeFamilies), ready to advertise or not; absent from an older
	// member's.
	Sessions *string `json:"s,omitempty"`
}

func encodeMeta(m meta) []byte {
	m.Version = metaVersion
	if m.Groups == nil {
		m.Groups = []string{}
	}
	if m.BGP == nil {
		none := ""
		m.BGP = &none
	}
	b, _ := json.Marshal(m) // cannot fail: strings and an int
	return b
}

// decodeMeta reads another member's metadata; a member whose metadata
// cannot be read is treated as Starting (never an owner).
func decodeMeta(b []byte) (meta, error) {
	var m meta
	if len(b) == 0 {
		return meta{State: StateStarting}, nil
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return meta{State: StateStarting}, fmt.Errorf("gossip metadata: %w", err)
	}
	switch m.State {
	case StateStarting, StateUnhealthy, StateHoldDown, StateReady, StateLeaving, StateDraining:
	default:
		return meta{State: StateStarting, MAC: m.MAC, Groups: m.Groups}, fmt.Errorf("gossip metadata: unknown state %q", m.State)
	}
	return m, nil
}

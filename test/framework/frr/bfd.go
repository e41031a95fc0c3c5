package frr

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
)

// BFDPeer is what bfdd says of one of its sessions ("show bfd peers
// json" and "show bfd peers counters json").
type BFDPeer struct {
	Peer  netip.Addr
	Local netip.Addr
	// Status is "up", "down", "init" or "shutdown".
	Status string
	// Diagnostic and RemoteDiagnostic are why this side and the remote
	// last left Up ("ok", "control detection time expired", ...).
	Diagnostic, RemoteDiagnostic string
	ID, RemoteID                 uint32
	// SessionUp and SessionDown count the times the session came up and
	// went down.
	SessionUp, SessionDown uint64
	// ControlIn and ControlOut count the Control packets received and
	// sent.
	ControlIn, ControlOut uint64
}

// bfdPeerJSON is the part of an element of "show bfd peers json" that
// BFDPeers reads.
type bfdPeerJSON struct {
	Peer             string `json:"peer"`
	Local            string `json:"local"`
	Status           string `json:"status"`
	Diagnostic       string `json:"diagnostic"`
	RemoteDiagnostic string `json:"remote-diagnostic"`
	ID               uint32 `json:"id"`
	RemoteID         uint32 `json:"remote-id"`
}

// bfdCountersJSON is the part of an element of "show bfd peers counters
// json" that BFDPeers reads.
type bfdCountersJSON struct {
	Peer        string `json:"peer"`
	SessionUp   uint64 `json:"session-up"`
	SessionDown uint64 `json:"session-down"`
	ControlIn   uint64 `json:"control-packet-input"`
	ControlOut  uint64 `json:"control-packet-output"`
}

// BFDPeers returns bfdd's sessions, by peer address.
func (r *Instance) BFDPeers(ctx context.Context) (map[netip.Addr]BFDPeer, error) {
	out, err := r.VTY(ctx, "show bfd peers json")
	if err != nil {
		return nil, err
	}
	counters, err := r.VTY(ctx, "show bfd peers counters json")
	if err != nil {
		return nil, err
	}
	return ParseBFDPeers(out, counters)
}

// ParseBFDPeers reads the output of vtysh's "show bfd peers json" and
// "show bfd peers counters json".
func ParseBFDPeers(peers, counters []byte) (map[netip.Addr]BFDPeer, error) {
	var ps []bfdPeerJSON
	if err := json.Unmarshal(peers, &ps); err != nil {
		return nil, fmt.Errorf("FRR BFD peers JSON: %w", err)
	}
	var cs []bfdCountersJSON
	if err := json.Unmarshal(counters, &cs); err != nil {
		return nil, fmt.Errorf("FRR BFD counters JSON: %w", err)
	}
	out := map[netip.Addr]BFDPeer{}
	for _, p := range ps {
		a, err := netip.ParseAddr(p.Peer)
		if err != nil {
			return nil, fmt.Errorf("FRR BFD peer %q: %w", p.Peer, err)
		}
		local, _ := netip.ParseAddr(p.Local)
		out[a] = BFDPeer{
			Peer: a, Local: local, Status: p.Status, Diagnostic: p.Diagnostic, RemoteDiagnostic: p.RemoteDiagnostic,
			ID: p.ID, RemoteID: p.RemoteID,
		}
	}
	for _, c := range cs {
		a, err := netip.ParseAddr(c.Peer)
		if err != nil {
			continue
		}
		if p, ok := out[a]; ok {
			p.SessionUp, p.SessionDown, p.ControlIn, p.ControlOut = c.SessionUp, c.SessionDown, c.ControlIn, c.ControlOut
			out[a] = p
		}
	}
	return out, nil
}

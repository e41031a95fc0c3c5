package membership

import (
	"context"
	"maps"
	"slices"
	"time"
)

// Agents that cannot gossip with each other (another key on one of them,
// the gossip port blocked, a host added during a partition) still see each
// other in two places that need no gossip: the API, where each publishes
// its name, gossip address and link-layer address (Observation.Hosts), and
// the link, where each agent's guard probes the addresses it holds once
// per ConflictProbeInterval. Together they tell that a host is alive and
// serving, and which host it is:
//
//   - A host known from the API, never seen in gossip by this process, and
//     heard claiming an address (an ARP probe or announcement from its MAC)
//     within the presence window is a Ready member for ownership. So two
//     agents that never gossiped share the addresses as if they did, and a
//     restarted agent whose join fails does not claim everything.
//   - It counts only for what the link shows it serves: the addresses that
//     every host may hold. The host groups it belongs to (groups.go) and
//     the BGP families it may advertise (bgp.go) travel only in gossip, so
//     for the addresses of a group, and those advertised over BGP, it is no
//     member: counted, it would win addresses that it never holds or
//     advertises (a host outside the group, or without a session), and no
//     host would serve them. The hosts of a group that cannot gossip each
//     claim the group's addresses instead; the split brain guard settles
//     each on one host. An address advertised over BGP is then advertised
//     by each host that cannot gossip with the others, as when gossip
//     between members is cut.
//   - It stops counting once it has not been heard for the window (its
//     agent died, its link went down): its share moves, as a dead gossip
//     member's does, a little later. Nothing depends on the apiserver: the
//     API only names the MACs (the last names seen stay in force while it
//     is away), the evidence is on the link.
//   - A host once seen in gossip is judged by gossip alone (failure
//     detection is its fast path); if gossip with it is cut, the split
//     brain guard settles each address on one host.
//   - Evidence comes from ARP: IPv6 DAD probes carry no MAC. With only IPv6
//     addresses such a host never counts; the guard still settles each
//     address on one host, naming the other from its published MAC.

// Host is another agent as LoadBalancer status shows it.
type Host struct {
	Name string
	// Addr is its gossip address, host:port ("" if unknown).
	Addr string
	// MAC is the link-layer address of its client-facing interface ("" if
	// unknown).
	MAC string
}

// presenceWindow is how long a host heard claiming an address counts as
// present: a few of its probe rounds, so that a lost probe changes nothing.
func presenceWindow(probeInterval time.Duration) time.Duration { return 3 * probeInterval }

// linkPeers returns the hosts known from the API (by MAC) that count as
// Ready members although gossip does not show them: never gossip members
// (gossiped), not members now (alive), and heard claiming an address within
// window before now. They are in no host group and advertise no BGP family:
// nothing on the link tells. Sorted by name.
func linkPeers(now time.Time, window time.Duration, self string, apiMACs map[string]string, heard map[string]time.Time, alive map[string]Member, gossiped map[string]bool) []Member {
	byName := map[string]Member{}
	for mac, name := range apiMACs {
		if name == self || gossiped[name] {
			continue
		}
		if _, ok := alive[name]; ok {
			continue
		}
		at, ok := heard[mac]
		if !ok || now.Sub(at) > window {
			continue
		}
		byName[name] = Member{Name: name, State: StateReady, MAC: mac, Groups: []string{}, BGP: []string{}}
	}
	out := make([]Member, 0, len(byName))
	for _, n := range slices.Sorted(maps.Keys(byName)) {
		out = append(out, byName[n])
	}
	return out
}

// unjoined returns the names of the hosts known from the API that were
// heard claiming an address within window but are not gossip members now,
// whether or not they ever were: gossip with hosts that serve fails.
func unjoined(now time.Time, window time.Duration, self string, apiMACs map[string]string, heard map[string]time.Time, alive map[string]Member) []string {
	var out []string
	for mac, name := range apiMACs {
		if name == self {
			continue
		}
		if _, ok := alive[name]; ok {
			continue
		}
		if at, ok := heard[mac]; ok && now.Sub(at) <= window {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// hostsByMAC maps each MAC to its host: gossip's (of every member ever
// seen) over the API's.
func hostsByMAC(gossip, api map[string]string) map[string]string {
	out := maps.Clone(api)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, gossip)
	return out
}

// forgetHeard drops evidence older than window.
func forgetHeard(heard map[string]time.Time, now time.Time, window time.Duration) {
	maps.DeleteFunc(heard, func(_ string, at time.Time) bool { return now.Sub(at) > window })
}

// listenFirst waits, while hosts known from the API are not members, until
// the guard has listened to the link for a presence window: those heard
// serving then count as members (see presence.go), so that a host whose
// join fails does not claim every address at once. It waits at most two
// windows.
func (g *Gossip) listenFirst(ctx context.Context) {
	window := presenceWindow(g.cfg.ConflictProbeInterval)
	deadline := time.Now().Add(2 * window)
	for time.Now().Before(deadline) {
		g.mu.Lock()
		pending := false
		for _, name := range g.apiMACs {
			if _, member := g.peers[name]; !member && name != g.cfg.Name {
				pending = true
			}
		}
		done := !pending || g.guardOff || !g.listenSince.IsZero() && time.Since(g.listenSince) >= window
		g.mu.Unlock()
		if done {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

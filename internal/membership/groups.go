package membership

import (
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
)

// Host groups: a pool's host selector (cloud-config `hosts`) lets only some
// load-balancer hosts serve its addresses. Every host must then elect the
// owner of such an address among the same hosts, or two would hold it, or
// none. So each host publishes in its gossip metadata the groups it belongs
// to (a short hash of each selector its labels match, of the selectors the
// LoadBalancers use), and the owner of an address of a group is elected
// among the Ready members that publish the group. A member that publishes
// no groups at all (an agent from before host selectors) belongs to every
// group, as it serves every address; a host known only from the link
// belongs to none (presence.go).

// Group names the group of the hosts a selector picks: a short hash of the
// selector's text, small enough for the gossip metadata (512 bytes). ""
// (every host) is no group.
func Group(selector string) string {
	if selector == "" {
		return ""
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(selector))
	return fmt.Sprintf("%08x", h.Sum32())
}

// MaxGroups bounds the groups a host publishes: 40 groups of 8 characters
// and their JSON fit the metadata with the rest. Observe keeps the first
// MaxGroups of Observation.MyGroups: the host is no candidate in the
// others. The cloud-config allows no more different host selectors.
const MaxGroups = 40

// candidateGroups are the groups of each candidate; nil: every group.
type candidateGroups map[string][]string

// ownersIn returns the candidates of group among cands.
func (g candidateGroups) in(cands []string, group string) []string {
	if group == "" {
		return cands
	}
	var out []string
	for _, c := range cands {
		if gs, ok := g[c]; !ok || gs == nil || slices.Contains(gs, group) {
			out = append(out, c)
		}
	}
	return out
}

func (g candidateGroups) equal(o candidateGroups) bool {
	if len(g) != len(o) {
		return false
	}
	for k, v := range g {
		w, ok := o[k]
		if !ok || (v == nil) != (w == nil) || !slices.Equal(v, w) {
			return false
		}
	}
	return true
}

// groupOf is the group of vip's owners ("" for every host).
func (g *Gossip) groupOf(vip netip.Addr) string { return g.obs.Groups[vip] }

// myGroups are this host's groups, sorted; never nil. g.mu is held.
func (g *Gossip) myGroups() []string {
	out := slices.Clone(g.obs.MyGroups)
	if out == nil {
		out = []string{}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

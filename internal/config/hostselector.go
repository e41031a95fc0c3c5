package config

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// A `hosts` selector chooses which load-balancer hosts serve a pool or peer
// with a router by the labels of each host's Node. A Node's kubelet may set
// most labels of its own Node; the NodeRestriction admission plugin keeps
// it from setting those under node-restriction.kubernetes.io/ (and
// <domain>.node-restriction.kubernetes.io/), the one namespace Kubernetes
// documents for labels a node must not choose. A selector on any other key
// would let a node (its kubelet's credentials) move its host into a pool or
// a router's sessions, so it is refused unless [Global]
// allow-node-set-labels says otherwise.

// placedSelector is a `hosts` selector and where it was written.
type placedSelector struct {
	sel     labels.Selector
	section string // e.g. `Pool "edge"`
	line    int
}

func setPoolHosts(t *target, sel labels.Selector) error {
	t.pool.Hosts = sel
	t.selectors = append(t.selectors, placedSelector{sel: sel, section: sectionLabel("Pool", t.pool.Name), line: t.line})
	return nil
}

func setPeerHosts(t *target, sel labels.Selector) error {
	t.peer.Hosts = sel
	t.selectors = append(t.selectors, placedSelector{sel: sel, section: sectionLabel("BGPPeer", t.peer.Name), line: t.line})
	return nil
}

// checkHostSelectors reports each selector that selects on a key a kubelet
// may set, naming every such key, unless allowNodeSet.
func checkHostSelectors(allowNodeSet bool, selectors []placedSelector, p *problems) {
	if allowNodeSet {
		return
	}
	for _, s := range selectors {
		var open []string
		reqs, _ := s.sel.Requirements()
		for _, r := range reqs {
			if !nodeRestricted(r.Key()) {
				open = append(open, r.Key())
			}
		}
		if len(open) == 0 {
			continue
		}
		what := "label key " + open[0] + " is"
		if len(open) > 1 {
			what = "label keys " + strings.Join(open, ", ") + " are"
		}
		p.add(s.line, s.section, "hosts",
			"%s not under %s/, so a Node's kubelet may be able to set it on its own Node and select its host; "+
				"label the hosts with a key under %s/ and select on it, or set allow-node-set-labels = true in [Global]",
			what, corev1.LabelNamespaceNodeRestriction, corev1.LabelNamespaceNodeRestriction)
	}
}

// nodeRestricted reports whether the NodeRestriction admission plugin
// keeps a kubelet from setting label key on its Node: the key's prefix is
// node-restriction.kubernetes.io or ends in .node-restriction.kubernetes.io.
func nodeRestricted(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	ns := corev1.LabelNamespaceNodeRestriction
	return prefix == ns || strings.HasSuffix(prefix, "."+ns)
}

// MaxHostSelectors is how many different `hosts` selectors the pools may
// use. The agents sharing addresses elect an address's holder among the
// hosts of its pool's selector: each publishes the groups it belongs to,
// one per selector its labels match, in its gossip metadata, which has
// room for this many (internal/membership MaxGroups; the agent's tests
// check that both agree).
const MaxHostSelectors = 40

// checkHostSelectorCount refuses a pool whose `hosts` selector is one more
// different selector than MaxHostSelectors; pools that share a selector
// count once.
func checkHostSelectorCount(cfg *Config, pools map[*Pool]int, p *problems) {
	seen := map[string]bool{}
	for _, pool := range cfg.Pools {
		if pool.Hosts == nil || pool.Hosts.Empty() {
			continue
		}
		sel := pool.Hosts.String()
		if seen[sel] {
			continue
		}
		seen[sel] = true
		if len(seen) > MaxHostSelectors {
			p.add(pools[pool], sectionLabel("Pool", pool.Name), "hosts",
				"%q makes %d different host selectors among the pools; at most %d fit the gossip metadata in which each load-balancer host publishes those it matches",
				sel, len(seen), MaxHostSelectors)
		}
	}
}

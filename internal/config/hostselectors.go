package config

// MaxHostSelectors is how many different `hosts` selectors the pools may
// use. The agents sharing addresses elect an address's holder among the
// hosts of its pool's selector: each publishes the groups it belongs to,
// one per selector its labels match, in its gossip metadata, which has
// room for this many (internal/membership MaxGroups; the agent's tests
// check that both agree).
const MaxHostSelectors = 40

// checkHostSelectors refuses a pool whose `hosts` selector is one more
// different selector than MaxHostSelectors; pools that share a selector
// count once.
func checkHostSelectors(cfg *Config, pools map[*Pool]int, p *problems) {
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

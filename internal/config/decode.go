package config

import (
	"fmt"
	"strings"
)

// decode turns raw sections into a Config, reporting every section, key and
// value problem, then checks the rules that span sections. The Config is
// meaningful only if no problem was reported.
func decode(raw []*rawSection, p *problems) *Config {
	d := &decoder{p: p, cfg: &Config{Machines: map[string]*Machine{}}, sectionLine: map[string]int{}, poolLines: map[*Pool]int{}, peerLines: map[*BGPPeer]int{}}
	for _, s := range raw {
		d.section(s)
	}
	if _, ok := d.sectionLine["Global"]; !ok {
		p.add(0, "", "", "no [Global] section; one is required, with at least region = ...")
	}
	for _, m := range d.cfg.Machines {
		if m.Region == "" {
			m.Region = d.cfg.Global.Region
		}
	}
	checkOverlaps(d.ranges, p)
	checkBGP(d.cfg, d.poolLines, d.peerLines, p)
	checkHostSelectors(d.cfg.Global.AllowNodeSetLabels, d.selectors, p)
	return d.cfg
}

type decoder struct {
	p           *problems
	cfg         *Config
	sectionLine map[string]int   // line of each section kept, by its label
	ranges      []placedRange    // of every pool kept
	selectors   []placedSelector // of every pool and BGP peer kept
	poolLines   map[*Pool]int    // line of each pool kept
	peerLines   map[*BGPPeer]int // line of each BGP peer kept
}

func (d *decoder) section(s *rawSection) {
	if s.Broken {
		return // the syntax error is reported
	}
	spec, ok := lookupSection(s.Name)
	if !ok {
		d.p.add(s.Line, "", "", "unknown section [%s]%s; the sections are %s",
			s.Name, didYouMean(s.Name, sectionNames()), sectionForms())
		return
	}
	label := sectionLabel(spec.name, s.Sub)
	t := &target{global: &Global{}, machine: &Machine{Name: s.Sub}, pool: &Pool{Name: s.Sub}, routes: &Routes{}, peer: &BGPPeer{Name: s.Sub}, firstLine: map[string]int{}}
	keep := d.checkHeader(spec, s, label)
	if keep {
		switch spec.kind {
		case globalSection:
			t.global = &d.cfg.Global
		case machineSection:
			d.cfg.Machines[s.Sub] = t.machine
		case poolSection:
			d.cfg.Pools = append(d.cfg.Pools, t.pool)
			d.poolLines[t.pool] = s.Line
		case bgpPeerSection:
			d.cfg.BGPPeers = append(d.cfg.BGPPeers, t.peer)
			d.peerLines[t.peer] = s.Line
		case routesSection:
			t.routes = &d.cfg.Routes
		}
	}
	// A section that is not kept is still decoded, into t, so that the
	// problems of its entries are reported too.
	given := d.entries(spec, s, t, label)
	if spec.kind == machineSection {
		checkBMC(t.machine, t.bmc, given, label, d.p)
	}
	if keep {
		d.ranges = append(d.ranges, t.ranges...)
		d.selectors = append(d.selectors, t.selectors...)
	}
}

// checkHeader reports whether the section's name is right and the section
// is the first of its name.
func (d *decoder) checkHeader(spec sectionSpec, s *rawSection, label string) bool {
	switch {
	case spec.checkName == nil && s.Sub != "":
		d.p.add(s.Line, label, "", "this section takes no name; write [%s]", spec.name)
		return false
	case spec.checkName != nil && s.Sub == "":
		d.p.add(s.Line, spec.name, "", "this section needs a name: [%s \"name\"], where name is %s", spec.name, spec.nameDoc)
		return false
	case spec.checkName != nil:
		if err := spec.checkName(s.Sub); err != nil {
			d.p.add(s.Line, label, "", "%v", err)
			return false
		}
	}
	if first, dup := d.sectionLine[label]; dup {
		d.p.add(s.Line, label, "", "section given twice, here and on line %d; merge them into one", first)
		return false
	}
	d.sectionLine[label] = s.Line
	return true
}

// entries decodes a section's entries into t and returns the line each key
// was first given on.
func (d *decoder) entries(spec sectionSpec, s *rawSection, t *target, label string) map[string]int {
	given := map[string]int{} // line each key was first given on
	for _, e := range s.Entries {
		k, ok := lookupKey(spec.kind, e.Key)
		if !ok {
			d.p.add(e.Line, label, e.Key, "unknown key%s; [%s] has %s",
				didYouMean(e.Key, keyNames(spec.kind)), spec.name, strings.Join(keyNames(spec.kind), ", "))
			continue
		}
		if first, dup := given[k.name]; dup && !k.multi {
			d.p.add(e.Line, label, k.name, "given twice, here and on line %d; it takes one value", first)
			continue
		} else if !dup {
			given[k.name] = e.Line
		}
		raw := e.Value
		if e.Blank {
			if k.value.blank == "" {
				d.p.add(e.Line, label, k.name, "needs a value: %s = ...", k.name)
				continue
			}
			raw = k.value.blank
		}
		t.line = e.Line
		if err := k.value.apply(t, raw); err != nil {
			d.p.add(e.Line, label, k.name, "%v", err)
		}
	}
	for _, k := range keysOf(spec.kind) {
		if _, ok := given[k.name]; ok {
			continue
		}
		switch {
		case k.required:
			d.p.add(s.Line, label, k.name, "required, but not given")
		case k.dflt != "":
			if err := k.value.apply(t, k.dflt); err != nil {
				panic(fmt.Sprintf("config: default %q of key %s is invalid: %v", k.dflt, k.name, err))
			}
		}
	}
	return given
}

func sectionNames() []string {
	names := make([]string, len(sections))
	for i, s := range sections {
		names[i] = s.name
	}
	return names
}

// sectionForms lists how each section is written: `[Global], [Machine "name"] and [Pool "name"]`.
func sectionForms() string {
	forms := make([]string, len(sections))
	for i, s := range sections {
		forms[i] = s.header()
	}
	return strings.Join(forms[:len(forms)-1], ", ") + " and " + forms[len(forms)-1]
}

func keyNames(section sectionKind) []string {
	var names []string
	for _, k := range keysOf(section) {
		names = append(names, k.name)
	}
	return names
}

// didYouMean suggests the known name closest to a misspelt one, if any is
// close enough: one edit away for short names, two for longer ones.
func didYouMean(name string, known []string) string {
	limit := 1
	if len(name) > 5 {
		limit = 2
	}
	best, bestDist := "", limit+1
	for _, k := range known {
		if d := editDistance(strings.ToLower(name), strings.ToLower(k)); d < bestDist {
			best, bestDist = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", best)
}

// editDistance counts the insertions, deletions, substitutions and swaps of
// adjacent characters that turn a into b (optimal string alignment).
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

package config

import (
	"cmp"
	"slices"
)

// Partial is a cloud-config that may have problems, as far as it could be
// read: what ParsePartial returns.
type Partial struct {
	// Config holds the sections without a problem. A [Machine], [Pool] or
	// [BGPPeer] section with a problem is left out of it; [Global] and
	// [Routes] are kept as far as they were read: a key with a problem
	// has its zero value, a key not given its default. Unlike Parse's, it
	// is not checked as a whole (a pool may announce over BGP with no
	// peer left, say). Never nil; read-only like Parse's.
	Config *Config
	// Problems is every problem in the file, as Parse reports them; nil
	// when there is none.
	Problems Errors
	// LeftOut are the sections left out of Config, sorted by line.
	LeftOut []Section
}

// Section names one [Machine], [Pool] or [BGPPeer] section.
type Section struct {
	Kind string // KindMachine, KindPool or KindBGPPeer
	Name string
	Line int
}

// The kinds of Section.
const (
	KindMachine = "Machine"
	KindPool    = "Pool"
	KindBGPPeer = "BGPPeer"
)

// String is how messages name the section: `BGPPeer "tor-a"`.
func (s Section) String() string { return sectionLabel(s.Kind, s.Name) }

// ParsePartial parses a cloud-config as Parse does, but instead of
// refusing a file with problems it keeps the sections that have none. It
// is for a reader that uses a few sections (the agents read [BGPPeer] and
// [Routes]) and must go on when a section it does not read, or one of
// many, is wrong. A problem belongs to the section it is written in, a
// syntax error on one of its lines too; a problem outside any section
// (such as a missing [Global]) leaves every section in.
func ParsePartial(name string, data []byte) Partial {
	p := &problems{file: name}
	raw := readRaw(data, p)
	cfg := decode(raw, p)
	part := Partial{Config: cfg}
	if p.err() != nil {
		part.Problems = p.list
	}
	part.LeftOut = leaveOut(cfg, sectionsWithProblems(raw, part.Problems), sectionLines(raw))
	return part
}

// sectionLines is the line of each readable section, by label; the first
// when a section is given twice.
func sectionLines(raw []*rawSection) map[string]int {
	lines := map[string]int{}
	for i := range raw {
		if l, ok := rawLabel(raw[i]); ok && lines[l] == 0 {
			lines[l] = raw[i].Line
		}
	}
	return lines
}

// sectionsWithProblems returns the labels (`Pool "public"`) of the
// sections that problems are in.
func sectionsWithProblems(raw []*rawSection, problems Errors) map[string]bool {
	bad := map[string]bool{}
	for _, e := range problems {
		switch {
		case e.Section != "":
			bad[e.Section] = true
		case e.Line > 0:
			if where, ok := enclosingSection(raw, e.Line); ok {
				bad[where] = true
			}
		}
	}
	return bad
}

// enclosingSection is the label of the readable section that line is in
// (the last header at or before it), if any.
func enclosingSection(raw []*rawSection, line int) (string, bool) {
	i, _ := slices.BinarySearchFunc(raw, line+1, func(s *rawSection, l int) int { return cmp.Compare(s.Line, l) })
	if i == 0 {
		return "", false
	}
	return rawLabel(raw[i-1])
}

// rawLabel is how messages name a raw section, unless it is unreadable or of
// no known kind.
func rawLabel(s *rawSection) (string, bool) {
	spec, ok := lookupSection(s.Name)
	if s.Broken || !ok {
		return "", false
	}
	return sectionLabel(spec.name, s.Sub), true
}

// leaveOut removes from cfg the [Machine], [Pool] and [BGPPeer] sections
// whose labels are bad, and returns them.
func leaveOut(cfg *Config, bad map[string]bool, lines map[string]int) []Section {
	var out []Section
	drop := func(kind, name string) bool {
		where := sectionLabel(kind, name)
		if bad[where] {
			out = append(out, Section{Kind: kind, Name: name, Line: lines[where]})
		}
		return bad[where]
	}
	for name := range cfg.Machines {
		if drop(KindMachine, name) {
			delete(cfg.Machines, name)
		}
	}
	cfg.Pools = slices.DeleteFunc(cfg.Pools, func(p *Pool) bool { return drop(KindPool, p.Name) })
	cfg.BGPPeers = slices.DeleteFunc(cfg.BGPPeers, func(p *BGPPeer) bool { return drop(KindBGPPeer, p.Name) })
	slices.SortFunc(out, func(a, b Section) int { return cmp.Compare(a.Line, b.Line) })
	return out
}

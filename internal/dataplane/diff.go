package dataplane

import (
	"slices"
	"strings"

	"sigs.k8s.io/knftables"
)

// tableComment marks the table as ours for anyone listing the ruleset.
const tableComment = "groundcloud load balancer: VIP forwarding, managed by groundcloud-agent"

// FullSync adds to tx the operations that make the kernel's table equal to
// desired whatever it holds now, as kube-proxy's full sync does: every chain
// and map is added (a no-op if it exists) and flushed, then filled. existing
// is what ListAll found in the table (nil if there was no table); chains,
// maps and sets in it that desired lacks are deleted. It is pure.
func FullSync(tx *knftables.Transaction, desired *Table, existing map[string][]string, batch bool) {
	tx.Add(&knftables.Table{Comment: knftables.PtrTo(tableComment)})
	chains, maps := sortedKeys(desired.Chains), sortedKeys(desired.Maps)
	for _, name := range chains {
		tx.Add(desired.Chains[name].object())
	}
	for _, name := range maps {
		tx.Add(desired.Maps[name].object())
	}
	// Adding a counter that exists keeps its values: counters survive
	// full syncs as they do partial ones.
	for _, name := range sortedKeys(desired.Counters) {
		tx.Add(&knftables.Counter{Name: name})
	}
	for _, name := range chains {
		tx.Flush(&knftables.Chain{Name: name})
	}
	for _, name := range maps {
		tx.Flush(&knftables.Map{Name: name})
	}

	staleChains := stale(existing["chain"], desired.Chains)
	for _, name := range staleChains {
		tx.Flush(&knftables.Chain{Name: name})
	}
	for _, name := range stale(existing["map"], desired.Maps) {
		tx.Delete(&knftables.Map{Name: name})
	}
	for _, name := range stale(existing["set"], map[string]bool{}) {
		tx.Delete(&knftables.Set{Name: name})
	}
	for _, name := range staleChains {
		tx.Delete(&knftables.Chain{Name: name})
	}
	// Every map was flushed or deleted above: nothing refers to these.
	for _, name := range stale(existing["counter"], desired.Counters) {
		tx.Delete(&knftables.Counter{Name: name})
	}

	for _, name := range chains {
		addRules(tx, desired.Chains[name])
	}
	for _, name := range maps {
		addElements(tx, desired.Maps[name], batch)
	}
}

// addElements adds every element of m, a map that is new or was flushed in
// tx: with batch a bucket map's in one command (see bucketsElement), others
// one command each. batch is off only for knftables' Fake, which models one
// element per command and cannot apply a list (see Syncer).
func addElements(tx *knftables.Transaction, m *Map, batch bool) {
	switch {
	case m.Buckets != nil && batch:
		if e := bucketsElement(m); e != nil {
			tx.Add(e)
		}
		return
	case m.Buckets != nil:
		for i, c := range m.Buckets.Index {
			if c != 0 {
				addElement(tx, m.Name, m.Buckets.element(i))
			}
		}
		return
	}
	for _, key := range m.keys() {
		e, _ := m.element(key)
		addElement(tx, m.Name, e)
	}
}

// bucketsElement writes all the elements of a bucket map as one: knftables
// writes an Element as "add element <map> { <key> : <value> }", and nft
// takes a list there, "{ 0 : a, 1 : b, ... }", so the first key is the
// Element's key and the rest of the list follows its value. nft 1.0.6
// spends about 25 µs on each add-element command and a fraction of that on
// each element of a list, so a full sync of 1,000 services (128,000
// elements) takes about 0.8 s this way against 3.7 s with one command per
// element (measured with nft -f in a namespace). nil when no bucket has a
// value.
func bucketsElement(m *Map) *knftables.Element {
	b := m.Buckets
	first := -1
	var rest strings.Builder
	var value [64]byte // one value's text, longer than any
	for i, c := range b.Index {
		if c == 0 {
			continue
		}
		if first < 0 {
			first = i
			rest.Grow(32 * BucketCount)
			rest.Write(b.appendText(value[:0], i))
			continue
		}
		rest.WriteString(", ")
		rest.WriteString(bucketKey(i))
		rest.WriteString(" : ")
		rest.Write(b.appendText(value[:0], i))
	}
	if first < 0 {
		return nil
	}
	return &knftables.Element{Map: m.Name, Key: []string{bucketKey(first)}, Value: []string{rest.String()}}
}

// PartialSync adds to tx only the operations that turn applied (the table
// as the last successful sync left it) into desired: new chains and maps,
// changed chains (flushed and refilled), changed map elements (deleted and
// added again: the kernel refuses to overwrite an element's value), removed
// elements, chains, maps and counters. Counters present in both are left
// alone, so their values go on. Operations are ordered so that nothing is
// deleted while still referenced. It is pure.
func PartialSync(tx *knftables.Transaction, applied, desired *Table, batch bool) {
	newChains, changedChains, goneChains := diffChains(applied, desired)
	newMaps, goneMaps := diffMaps(applied, desired)
	newCounters, goneCounters := diffCounters(applied, desired)

	for _, name := range newChains {
		tx.Add(desired.Chains[name].object())
	}
	for _, name := range newMaps {
		tx.Add(desired.Maps[name].object())
	}
	for _, name := range newCounters {
		tx.Add(&knftables.Counter{Name: name})
	}
	for _, name := range sortedKeys(desired.Maps) {
		if old, ok := applied.Maps[name]; ok && !slices.Contains(newMaps, name) {
			deleteStaleElements(tx, old, desired.Maps[name], batch)
		}
	}
	for _, name := range append(slices.Clone(changedChains), goneChains...) {
		tx.Flush(&knftables.Chain{Name: name})
	}
	for _, name := range append(slices.Clone(newChains), changedChains...) {
		addRules(tx, desired.Chains[name])
	}
	for _, name := range sortedKeys(desired.Maps) {
		m := desired.Maps[name]
		old := applied.Maps[name]
		if slices.Contains(newMaps, name) {
			old = nil
		}
		if old != nil && old.Buckets != nil && m.Buckets != nil {
			if old.Buckets.equal(m.Buckets) {
				continue // the common case of a bucket map: nothing moved
			}
			// A node change: compare bucket by bucket, formatting only the
			// elements that move.
			addMoved(tx, m, old.Buckets, batch)
			continue
		}
		if old == nil {
			addElements(tx, m, batch)
			continue
		}
		for _, key := range differing(m, old) {
			e, _ := m.element(key)
			addElement(tx, name, e)
		}
	}
	for _, name := range goneMaps {
		tx.Delete(&knftables.Map{Name: name})
	}
	for _, name := range goneChains {
		tx.Delete(&knftables.Chain{Name: name})
	}
	// Last: the elements that referred to them are gone by now.
	for _, name := range goneCounters {
		tx.Delete(&knftables.Counter{Name: name})
	}
}

func diffChains(applied, desired *Table) (added, changed, gone []string) {
	for _, name := range sortedKeys(desired.Chains) {
		old, ok := applied.Chains[name]
		switch {
		case !ok:
			added = append(added, name)
		case !old.equal(desired.Chains[name]):
			changed = append(changed, name)
		}
	}
	for _, name := range sortedKeys(applied.Chains) {
		if _, ok := desired.Chains[name]; !ok {
			gone = append(gone, name)
		}
	}
	return added, changed, gone
}

// diffMaps returns the maps to add and to delete. Map types are constants of
// this package, so a map present in both is never changed, only its elements.
func diffMaps(applied, desired *Table) (added, gone []string) {
	for _, name := range sortedKeys(desired.Maps) {
		if _, ok := applied.Maps[name]; !ok {
			added = append(added, name)
		}
	}
	for _, name := range sortedKeys(applied.Maps) {
		if _, ok := desired.Maps[name]; !ok {
			gone = append(gone, name)
		}
	}
	return added, gone
}

func deleteStaleElements(tx *knftables.Transaction, old, desired *Map, batch bool) {
	if old.Buckets != nil && desired.Buckets != nil {
		if old.Buckets.equal(desired.Buckets) {
			return
		}
		deleteMoved(tx, old, desired.Buckets, batch)
		return
	}
	for _, key := range differing(old, desired) {
		e, _ := old.element(key)
		tx.Delete(&knftables.Element{Map: old.Name, Key: e.Key})
	}
}

// differing returns, in m's order (see keys), the keys of m's elements
// that other lacks or holds with another value. Of two plain maps only the
// keys found are sorted: a sync that adds one Service compares thousands
// of elements of service-ports and node-ports and writes three.
func differing(m, other *Map) []string {
	var keys []string
	if m.Buckets != nil || other.Buckets != nil {
		for _, key := range m.keys() {
			e, _ := m.element(key)
			if o, ok := other.element(key); !ok || !o.equal(e) {
				keys = append(keys, key)
			}
		}
		return keys
	}
	for key, e := range m.Elements {
		if o, ok := other.Elements[key]; !ok || !o.equal(e) {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	return keys
}

// addMoved adds the elements of bucket map m whose buckets moved from
// applied: with batch in one command per map (as bucketsElement), else one
// each. A node added to or removed from 100 moves about five buckets of
// every service (the balanced assignment moves others than the node's
// own), and nft 1.0.6 spends about 25 µs on each command: at 5,000
// services the moves took 4 to 8 s one command per element and 1.2 to
// 1.9 s batched (nft -f in a namespace, side by side, on a busy machine).
func addMoved(tx *knftables.Transaction, m *Map, applied *Buckets, batch bool) {
	first := -1
	var rest strings.Builder
	for i := range BucketCount {
		if !m.Buckets.moved(applied, i) {
			continue
		}
		switch {
		case !batch:
			addElement(tx, m.Name, m.Buckets.element(i))
		case first < 0:
			first = i
			rest.WriteString(m.Buckets.text(i))
		default:
			rest.WriteString(", ")
			rest.WriteString(bucketKey(i))
			rest.WriteString(" : ")
			rest.WriteString(m.Buckets.text(i))
		}
	}
	if first >= 0 {
		tx.Add(&knftables.Element{Map: m.Name, Key: []string{bucketKey(first)}, Value: []string{rest.String()}})
	}
}

// deleteMoved deletes the elements of bucket map old whose buckets have
// another value in desired or none: with batch in one command ("delete
// element <map> { 3, 17 }"), else one each.
func deleteMoved(tx *knftables.Transaction, old *Map, desired *Buckets, batch bool) {
	var keys []string
	for i := range BucketCount {
		if old.Buckets.moved(desired, i) {
			keys = append(keys, bucketKey(i))
		}
	}
	switch {
	case len(keys) == 0:
	case batch:
		tx.Delete(&knftables.Element{Map: old.Name, Key: []string{strings.Join(keys, ", ")}})
	default:
		for _, k := range keys {
			tx.Delete(&knftables.Element{Map: old.Name, Key: []string{k}})
		}
	}
}

func addRules(tx *knftables.Transaction, c *Chain) {
	for _, r := range c.Rules {
		tx.Add(&knftables.Rule{Chain: c.Name, Rule: r})
	}
}

func addElement(tx *knftables.Transaction, mapName string, e Element) {
	tx.Add(&knftables.Element{Map: mapName, Key: e.Key, Value: e.Value})
}

// stale returns the names in existing that want lacks, sorted.
func stale[V any](existing []string, want map[string]V) []string {
	var out []string
	for _, name := range existing {
		if _, ok := want[name]; !ok {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

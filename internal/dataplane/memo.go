package dataplane

import (
	"net/netip"
	"strconv"
	"strings"

	"sigs.k8s.io/knftables"
)

// assignMemo remembers each service's bucket assignment per family, in
// compact form (see Buckets), so that a sync recomputes the buckets of a
// service only when its backends (names, health or addresses) changed.
// Assign orders 128 × backends pairs: about 0.3 ms for
// 100 nodes (1 ms when it sorted them all), which for thousands of services
// would make every sync take seconds.
// A nil *assignMemo computes every time.
type assignMemo struct {
	entries map[string]memoEntry // by family and service name
	// backendSets interns equal backend lists' keys (appendBackendsKey)
	// and their choices, so that thousands of services over the same
	// nodes hold one copy.
	backendSets map[string]*backendSet
	used        map[string]bool
	scratch     []byte // appendBackendsKey's buffer, reused
	// texts are the names and rule of each service port's chain (see
	// portText), with the sweep they were last used in.
	texts map[portTextKey]swept[portText]
	// frontends are the texts of each frontend's elements (see
	// frontendText), swept like texts.
	frontends map[frontendTextKey]swept[frontendText]
	// received are the received counters of frontends and their map
	// elements' value (see receivedText), swept like texts.
	received map[receivedKey]swept[receivedText]
	sweeps   uint64
	// sizes are the numbers of elements of the plain maps of the tables
	// planned last, by family and name (see presize).
	sizes map[mapSizeKey]int
}

type mapSizeKey struct {
	family knftables.Family
	name   string
}

// presize makes the plain maps of a new table t as large as they were in
// the table planned before it: service-ports and node-ports hold thousands
// of elements, and growing them from empty was a tenth of a sync's CPU.
func (m *assignMemo) presize(t *Table) {
	if m == nil {
		return
	}
	for name, mp := range t.Maps {
		if n := m.sizes[mapSizeKey{t.Family, name}]; n > 0 && mp.Buckets == nil && len(mp.Elements) == 0 {
			mp.Elements = make(map[string]Element, n)
		}
	}
	if n := m.sizes[mapSizeKey{t.Family, countersSizeKey}]; n > 0 && t.Counters == nil {
		t.Counters = make(map[string]TrafficCounter, n)
	}
}

// countersSizeKey is the name under which sizes holds the number of a
// table's counters (no map has a name with a space).
const countersSizeKey = "counters "

// recordSizes remembers the sizes of t's plain maps for presize.
func (m *assignMemo) recordSizes(t *Table) {
	if m == nil {
		return
	}
	if m.sizes == nil {
		m.sizes = map[mapSizeKey]int{}
	}
	for name, mp := range t.Maps {
		if mp.Buckets == nil {
			m.sizes[mapSizeKey{t.Family, name}] = len(mp.Elements)
		}
	}
	m.sizes[mapSizeKey{t.Family, countersSizeKey}] = len(t.Counters)
}

// portTextKey is what the chain name and DNAT rule of a service port with
// a bucket map of its own are made of in one family's table (proxy
// forwarding); small, as the memo holds one per such port.
type portTextKey struct {
	service        string
	protocol       Protocol
	port, nodePort uint16
	ipv6, affinity bool
}

// portText is the text of one service port's chain: formatting it for
// every service on every sync was a tenth of a sync's CPU at 5,000
// services, and the table applied last then holds the same strings.
type portText struct {
	chain string
	rule  string
}

// frontendTextKey is what the elements of one frontend (VIP, protocol, port)
// in the plain maps are made of.
type frontendTextKey struct {
	vip            netip.Addr
	protocol       Protocol
	port, nodePort uint16
	chain          string // the chain service-ports sends it to
}

// frontendText is the text of a frontend's elements: its key (VIP .
// protocol . port) in the maps' order and joined, its NodePort, the
// service-ports verdict and the VIP as vip-snat's key and value. Made once
// and reused, the elements of a sync share their strings with the table
// applied before, so that comparing the two compares pointers: at 5,000
// services formatting and comparing them was a third of a sync's CPU.
type frontendText struct {
	key            []string
	joined         string
	nodePort, verd []string
	vip            []string
}

func newFrontendText(k frontendTextKey) frontendText {
	key := []string{k.vip.String(), k.protocol.nft(), strconv.Itoa(int(k.port))}
	return frontendText{
		key: key, joined: strings.Join(key, " . "),
		nodePort: []string{strconv.Itoa(int(k.nodePort))},
		verd:     []string{"goto " + k.chain},
		vip:      key[:1:1],
	}
}

// frontend is the frontendText of k, made when k was not asked for in the
// sync before (always, with a nil memo).
func (m *assignMemo) frontend(k frontendTextKey) frontendText {
	if m == nil {
		return newFrontendText(k)
	}
	return remember(m.frontends, m.sweeps, k, newFrontendText)
}

// swept is a memo's value with the sweep it was last used in.
type swept[V any] struct {
	v     V
	sweep uint64
}

// remember returns memo[k], made by newV when absent, and marks it used
// in sweep.
func remember[K comparable, V any](memo map[K]swept[V], sweep uint64, k K, newV func(K) V) V {
	e, ok := memo[k]
	if !ok {
		e.v = newV(k)
	}
	if !ok || e.sweep != sweep {
		e.sweep = sweep
		memo[k] = e
	}
	return e.v
}

// forget deletes the values of memo not used in sweep.
func forget[K comparable, V any](memo map[K]swept[V], sweep uint64) {
	for k, e := range memo {
		if e.sweep != sweep {
			delete(memo, k)
		}
	}
}

type memoEntry struct {
	backends string // appendBackendsKey of the input, interned
	index    *[BucketCount]uint8
	choices  *BucketChoices
}

// backendSet is one distinct backend list and its choices per family
// (IPv4, IPv6), made when first asked for.
type backendSet struct {
	key     string
	choices [2]*BucketChoices
}

func newAssignMemo() *assignMemo {
	return &assignMemo{entries: map[string]memoEntry{}, backendSets: map[string]*backendSet{}, used: map[string]bool{},
		texts: map[portTextKey]swept[portText]{}, frontends: map[frontendTextKey]swept[frontendText]{},
		received: map[receivedKey]swept[receivedText]{}}
}

// text is the portText of k, formatted when k was not asked for in the
// sync before (always, with a nil memo).
func (m *assignMemo) text(k portTextKey) portText {
	if m == nil {
		return newPortText(k)
	}
	return remember(m.texts, m.sweeps, k, newPortText)
}

// assign is the compact Assign(seed, backends) of the backends of family
// f (see compactAssign), remembered under key: the bucket index and the
// choices it points into. With the same backends as another service the
// choices are the same object.
func (m *assignMemo) assign(key, seed string, f family, backends []Backend) (*[BucketCount]uint8, *BucketChoices) {
	if m == nil {
		index, used, _ := compactAssign(seed, backends)
		return index, newChoices(f, used)
	}
	m.scratch = appendBackendsKey(m.scratch[:0], backends)
	set, ok := m.backendSets[string(m.scratch)] // no copy of the key to look up
	if !ok {
		bk := string(m.scratch)
		set = &backendSet{key: bk}
		m.backendSets[bk] = set
	}
	m.used[key] = true
	if e, ok := m.entries[key]; ok && e.backends == set.key {
		return e.index, e.choices
	}
	index, used, all := compactAssign(seed, backends)
	var choices *BucketChoices
	if all {
		fi := 0
		if f.nft == ipv6.nft {
			fi = 1
		}
		if set.choices[fi] == nil {
			set.choices[fi] = newChoices(f, used)
		}
		choices = set.choices[fi]
	} else {
		choices = newChoices(f, used)
	}
	m.entries[key] = memoEntry{backends: set.key, index: index, choices: choices}
	return index, choices
}

// sweep forgets the entries assign was not asked for since the last sweep.
func (m *assignMemo) sweep() {
	if m == nil {
		return
	}
	live := map[string]bool{}
	for key, e := range m.entries {
		if !m.used[key] {
			delete(m.entries, key)
			continue
		}
		live[e.backends] = true
	}
	for bk := range m.backendSets {
		if !live[bk] {
			delete(m.backendSets, bk)
		}
	}
	clear(m.used)
	forget(m.texts, m.sweeps)
	forget(m.frontends, m.sweeps)
	forget(m.received, m.sweeps)
	m.sweeps++
}

// appendBackendsKey appends the key of backends: everything of backends that Assign and the bucket values
// read: names, health and addresses, in order (Assign does not depend on
// the order, so a new order only costs a recomputation).
func appendBackendsKey(b []byte, backends []Backend) []byte {
	for _, be := range backends {
		b = append(b, be.Node...)
		if be.Healthy {
			b = append(b, "\x00+"...)
		} else {
			b = append(b, "\x00-"...)
		}
		for _, a := range be.Addrs {
			b = a.AppendTo(append(b, ' '))
		}
		b = append(b, 0)
	}
	return b
}

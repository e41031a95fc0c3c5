package dataplane

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/knftables"
)

// TableName is the name of the table the data plane owns in the "ip", the
// "ip6" and the "netdev" family. Nothing else in any family is ever read or
// changed.
const TableName = "groundcloud"

// Ruleset is the in-memory model of the data plane: one table per family.
// Desired computes it; the Syncer keeps the last applied one to diff against.
type Ruleset struct {
	IPv4 *Table
	IPv6 *Table
	// NetDev forwards passthrough services (both IP families).
	NetDev *Table
}

// Table returns the table of family f (ip, ip6 or netdev).
func (r Ruleset) Table(f knftables.Family) *Table {
	switch f {
	case knftables.IPv6Family:
		return r.IPv6
	case knftables.NetDevFamily:
		return r.NetDev
	}
	return r.IPv4
}

// Table is the content of one family's table.
type Table struct {
	Family knftables.Family
	Chains map[string]*Chain
	Maps   map[string]*Map
	// UDPFlows lists where new UDP flows may currently be forwarded. It is not
	// programmed; when a flow target disappears between two syncs its
	// conntrack entries are deleted, because UDP has no end that would let
	// the flows move on by themselves.
	UDPFlows map[Flow]bool
	// Counters are the table's named traffic counters by name (see
	// Counting); nil without.
	Counters map[string]TrafficCounter
}

// Chain is a chain and its rules, in nft syntax.
type Chain struct {
	Name string
	// Base is set for base chains (attached to a hook).
	Base  *BaseChain
	Rules []string
}

// BaseChain holds the hook properties of a base chain.
type BaseChain struct {
	Type     knftables.BaseChainType
	Hook     knftables.BaseChainHook
	Priority knftables.BaseChainPriority
	// Device is the interface of an ingress chain.
	Device string
}

// Map is a named map and its elements.
type Map struct {
	Name string
	// Type or TypeOf (not both) is the map's type in nft syntax.
	Type    string
	TypeOf  string
	Comment string
	// Elements are keyed by their key joined with " . ".
	Elements map[string]Element
	// Buckets, set for a bucket map instead of Elements, holds the
	// elements of buckets 0 to BucketCount-1 (the keys) in compact form:
	// a bucket map's values repeat a few backends, shared by many
	// services, and are formatted only when written (see Buckets).
	Buckets *Buckets
}

// Element is one map element.
type Element struct {
	Key   []string
	Value []string
}

// Flow is a target of UDP flows: packets to VIP:Port forwarded to
// Backend:NodePort.
type Flow struct {
	VIP      netip.Addr
	Port     uint16
	Backend  netip.Addr
	NodePort uint16
}

func newTable(f knftables.Family) *Table {
	return &Table{Family: f, Chains: map[string]*Chain{}, Maps: map[string]*Map{}, UDPFlows: map[Flow]bool{}}
}

func (t *Table) addChain(name string, rules ...string) *Chain {
	c := &Chain{Name: name, Rules: rules}
	t.Chains[name] = c
	return c
}

func (t *Table) addBaseChain(name string, typ knftables.BaseChainType, hook knftables.BaseChainHook, prio knftables.BaseChainPriority, rules ...string) {
	t.addChain(name, rules...).Base = &BaseChain{Type: typ, Hook: hook, Priority: prio}
}

func (t *Table) addMap(name, typ, comment string) {
	t.Maps[name] = &Map{Name: name, Type: typ, Comment: comment, Elements: map[string]Element{}}
}

// addBucketMap adds a bucket map: keyed by a jhash result (typeof
// "numgen inc mod 2", see bucketMapTypeOf), one element per bucket.
func (t *Table) addBucketMap(name, valueTypeOf string, buckets *Buckets) {
	typeOf, ok := bucketTypeOfs[valueTypeOf]
	if !ok {
		typeOf = bucketMapTypeOf + " : " + valueTypeOf
	}
	t.Maps[name] = &Map{Name: name, TypeOf: typeOf, Buckets: buckets}
}

// bucketTypeOfs are the typeofs of the bucket maps by their value's, made
// once rather than for each map.
var bucketTypeOfs = func() map[string]string {
	out := map[string]string{}
	for _, f := range []family{ipv4, ipv6} {
		for _, p := range []Protocol{TCP, UDP} {
			v := dnatValueTypeOf(f, p)
			out[v] = bucketMapTypeOf + " : " + v
		}
	}
	out["verdict"] = bucketMapTypeOf + " : verdict"
	for _, f := range []family{ipv4, ipv6} {
		out[f.ip+" daddr"] = bucketMapTypeOf + " : " + f.ip + " daddr"
	}
	return out
}()

func (t *Table) addElement(mapName string, key, value []string) {
	t.addElementText(mapName, strings.Join(key, " . "), key, value)
}

// addElementText is addElement with the key joined already.
func (t *Table) addElementText(mapName, joined string, key, value []string) {
	t.Maps[mapName].Elements[joined] = Element{Key: key, Value: value}
}

// gotoReject is no-endpoints' verdict, shared by its elements.
var gotoReject = []string{"goto " + chainReject}

// verdictDrop is proxy-vips' verdict, shared by its elements.
var verdictDrop = []string{"drop"}

func (c *Chain) equal(o *Chain) bool {
	return (c.Base == nil) == (o.Base == nil) && (c.Base == nil || *c.Base == *o.Base) && slices.Equal(c.Rules, o.Rules)
}

func (e Element) equal(o Element) bool {
	return slices.Equal(e.Key, o.Key) && slices.Equal(e.Value, o.Value)
}

func (c *Chain) object() *knftables.Chain {
	obj := &knftables.Chain{Name: c.Name}
	if c.Base != nil {
		obj.Type = knftables.PtrTo(c.Base.Type)
		obj.Hook = knftables.PtrTo(c.Base.Hook)
		obj.Priority = knftables.PtrTo(c.Base.Priority)
		if c.Base.Device != "" {
			obj.Device = knftables.PtrTo(c.Base.Device)
		}
	}
	return obj
}

func (m *Map) object() *knftables.Map {
	obj := &knftables.Map{Name: m.Name, Type: m.Type, TypeOf: m.TypeOf}
	if m.Comment != "" {
		obj.Comment = knftables.PtrTo(m.Comment)
	}
	return obj
}

// keys returns the keys of m's elements in the order they are written:
// sorted, or by bucket for a bucket map.
func (m *Map) keys() []string {
	if m.Buckets == nil {
		return sortedKeys(m.Elements)
	}
	keys := make([]string, 0, BucketCount)
	for i, c := range m.Buckets.Index {
		if c != 0 {
			keys = append(keys, bucketKey(i))
		}
	}
	return keys
}

// element returns the element of m with key, if any.
func (m *Map) element(key string) (Element, bool) {
	if m == nil {
		return Element{}, false
	}
	if m.Buckets == nil {
		e, ok := m.Elements[key]
		return e, ok
	}
	i, err := strconv.Atoi(key)
	if err != nil || i < 0 || i >= BucketCount || m.Buckets.Index[i] == 0 {
		return Element{}, false
	}
	return m.Buckets.element(i), true
}

// bucketKeys are the keys of a bucket map, "0" to "127", made once.
var bucketKeys = func() []string {
	keys := make([]string, BucketCount)
	for i := range keys {
		keys[i] = strconv.Itoa(i)
	}
	return keys
}()

func bucketKey(i int) string {
	if i < len(bucketKeys) {
		return bucketKeys[i]
	}
	return strconv.Itoa(i)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

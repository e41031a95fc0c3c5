package dataplane

import (
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/knftables"
)

// Buckets are the elements of a bucket map in compact form: one byte per
// bucket naming one of a few choices shared by many maps, formatted in
// nft syntax only when an element is written. Thousands of services over
// the same nodes then hold one list of those nodes, not BucketCount value
// strings each.
type Buckets struct {
	// Index gives the choice of each bucket, 1 + its index in Choices, or
	// 0 for no element. The maps of one service's ports share it, and the
	// Syncer's memo holds the same array.
	Index *[BucketCount]uint8
	// Choices are the backends the buckets go to, shared by every map
	// over the same backends.
	Choices *BucketChoices
	// NodePort, in a DNAT map, follows a choice's address in each value:
	// "address . NodePort". 0 in a group's DNAT map: the value is the
	// address, and each service's rule adds its NodePort.
	NodePort uint16
	// Verdict marks a passthrough verdict map: each value is "goto" the
	// choice's node chain of Family, or "accept" for the node Self.
	Verdict bool
	Self    string
	Family  knftables.Family
}

// BucketChoices are the backends of one family that a bucket index names.
type BucketChoices struct {
	// Nodes are the backends' node names, Addrs their addresses of the
	// family (the ones forwarded to).
	Nodes []string
	Addrs []netip.Addr
	// gotos are the verdicts "goto <node chain>" of passthrough maps,
	// made once by withGotos.
	gotos []string
}

// bucketValue is what one bucket's element says, comparable without
// formatting: a DNAT map's address and NodePort, or a verdict map's node
// ("" for accept).
type bucketValue struct {
	addr netip.Addr
	port uint16
	node string
}

// value returns the value of bucket i, and false when it has no element.
func (b *Buckets) value(i int) (bucketValue, bool) {
	c := b.Index[i]
	if c == 0 {
		return bucketValue{}, false
	}
	if b.Verdict {
		if node := b.Choices.Nodes[c-1]; node != b.Self {
			return bucketValue{node: node}, true
		}
		return bucketValue{}, true
	}
	return bucketValue{addr: b.Choices.Addrs[c-1], port: b.NodePort}, true
}

// appendText appends the value of bucket i (which has an element) in nft
// syntax.
func (b *Buckets) appendText(dst []byte, i int) []byte {
	c := b.Index[i] - 1
	if b.Verdict {
		if b.Choices.Nodes[c] == b.Self {
			return append(dst, "accept"...)
		}
		if b.Choices.gotos != nil {
			return append(dst, b.Choices.gotos[c]...)
		}
		return append(dst, gotoNode(familyOf(b.Family), b.Choices.Nodes[c])...)
	}
	dst = b.Choices.Addrs[c].AppendTo(dst)
	if b.NodePort == 0 {
		return dst
	}
	dst = append(dst, " . "...)
	return strconv.AppendUint(dst, uint64(b.NodePort), 10)
}

// text is the value of bucket i (which has an element) in nft syntax.
func (b *Buckets) text(i int) string {
	return string(b.appendText(make([]byte, 0, 48), i))
}

// element is the element of bucket i, which has one.
func (b *Buckets) element(i int) Element {
	return Element{Key: []string{bucketKey(i)}, Value: []string{b.text(i)}}
}

// equal reports whether every bucket of b and o has the same value: at
// once when they share their index and choices, as the maps of a service
// whose backends did not change do.
func (b *Buckets) equal(o *Buckets) bool {
	if b.Index == o.Index && b.Choices == o.Choices && b.NodePort == o.NodePort &&
		b.Verdict == o.Verdict && b.Self == o.Self && b.Family == o.Family {
		return true
	}
	for i := range BucketCount {
		v, ok := b.value(i)
		ov, ook := o.value(i)
		if ok != ook || v != ov {
			return false
		}
	}
	return true
}

// moved reports whether bucket i of b has an element that o lacks or
// that differs from o's.
func (b *Buckets) moved(o *Buckets, i int) bool {
	v, ok := b.value(i)
	if !ok {
		return false
	}
	ov, ook := o.value(i)
	return !ook || v != ov
}

// hasElements reports whether the buckets have elements: either all of
// them do, or none (no healthy backend).
func hasElements(index *[BucketCount]uint8) bool { return index[0] != 0 }

// gotoNode is a passthrough bucket's verdict for a node other than Self.
func gotoNode(f family, node string) string { return "goto " + nodeChainName(f, node) }

// newChoices lists the names and addresses of family f of backends, which
// all have one.
func newChoices(f family, backends []Backend) *BucketChoices {
	c := &BucketChoices{Nodes: make([]string, len(backends)), Addrs: make([]netip.Addr, len(backends))}
	for i, b := range backends {
		c.Nodes[i], c.Addrs[i] = b.Node, firstAddr(f, b)
	}
	return c
}

// withGotos fills the passthrough verdicts of c's nodes (once) and returns c.
func (c *BucketChoices) withGotos(f family) *BucketChoices {
	if c.gotos == nil {
		c.gotos = make([]string, len(c.Nodes))
		for i, n := range c.Nodes {
			c.gotos[i] = gotoNode(f, n)
		}
	}
	return c
}

// compactAssign is Assign(seed, backends) in compact form: each bucket's
// backend as 1 + its index in backends, 0 for none. backends come sorted by
// name without repeats (normalize makes them so). ok is false when they
// are more than a byte can count: then the index points into only the
// backends that got a bucket, returned as used.
func compactAssign(seed string, backends []Backend) (index *[BucketCount]uint8, used []Backend, ok bool) {
	names, owners := assignOwners(seed, backends)
	index = new([BucketCount]uint8)
	if len(backends) <= math.MaxUint8 && slices.EqualFunc(names, backends, func(n string, b Backend) bool { return n == b.Node }) {
		for i, o := range owners {
			index[i] = uint8(o + 1) // -1, no backend, is 0
		}
		return index, backends, true
	}
	pos := map[int]uint8{}
	for _, o := range slices.Compact(slices.Sorted(slices.Values(owners[:]))) {
		if o < 0 {
			continue
		}
		j, found := slices.BinarySearchFunc(backends, names[o], func(b Backend, n string) int { return strings.Compare(b.Node, n) })
		if !found {
			j = slices.IndexFunc(backends, func(b Backend) bool { return b.Node == names[o] })
		}
		used = append(used, backends[j])
		pos[o] = uint8(len(used))
	}
	for i, o := range owners {
		index[i] = pos[o]
	}
	return index, used, false
}

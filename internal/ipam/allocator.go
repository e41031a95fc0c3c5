package ipam

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/groundcloud/groundcloud/internal/annotation"
	"github.com/groundcloud/groundcloud/internal/config"
)

// Allocation is what a Service holds: one pool and one address per family.
type Allocation struct {
	Pool      string
	Addresses []netip.Addr // ordered like the request's families
}

func (a Allocation) clone() Allocation {
	a.Addresses = slices.Clone(a.Addresses)
	return a
}

// PoolUsage is how much of one family of one pool is held, for metrics.
type PoolUsage struct {
	Pool   string
	Family v1.IPFamily
	Size   uint64 // addresses in the pool's ranges of the family, saturating at math.MaxUint64
	Used   uint64 // of those, held by any Service (orphans included)
	// InUse are those of the rest that a station which is no load-balancer
	// host claims (SetInUse): never handed out, so not free either.
	InUse uint64
}

// Allocator assigns addresses of pools to Services. It is not safe for
// concurrent use: the caller holds it behind a mutex. It does no I/O; the
// caller persists what Assign returns and rebuilds a new Allocator with
// Restore after a restart.
type Allocator struct {
	pools   []*pool // config order
	byName  map[string]*pool
	records map[types.NamespacedName]*record
	held    map[netip.Addr]*holding
	used    [2]addrSet // the keys of held and of inUse, per family
	shared  map[string]map[netip.Addr]struct{}
	inUse   map[netip.Addr]bool // claimed by a station which is no load-balancer host (SetInUse)
}

// pool is a config.Pool with its ranges as sorted spans per family.
type pool struct {
	*config.Pool
	spans [2][]span
}

func (p *pool) contains(a netip.Addr) bool {
	u := toU128(a)
	return slices.ContainsFunc(p.spans[familyOf(a)], func(s span) bool { return s.contains(u) })
}

// record is what a Service holds, and on what terms.
type record struct {
	alloc      Allocation
	sharingKey string
	ports      []Port            // sorted, distinct
	forwarding config.Forwarding // the Service's own; "": its pool's
	// served is the forwarding its addresses were served with when it was
	// last assigned, restored or the pools replaced; see served.
	served config.Forwarding
}

// holding is the state of one held address. Every owner has the same
// sharing key; more than one owner only with a non-empty key.
type holding struct {
	sharingKey string
	owners     []types.NamespacedName // sorted
	ports      map[Port]types.NamespacedName
}

// New returns an Allocator over pools, which it does not modify. Pools are
// tried in the order given. They should not overlap (config validates
// that); if they do, an address belongs to the first pool containing it.
func New(pools []*config.Pool) *Allocator {
	a := &Allocator{
		records: map[types.NamespacedName]*record{},
		held:    map[netip.Addr]*holding{},
		shared:  map[string]map[netip.Addr]struct{}{},
		inUse:   map[netip.Addr]bool{},
	}
	a.SetPools(pools)
	return a
}

// SetPools replaces the pools, as after a config reload. No allocation
// changes: those the new pools would not grant become orphans (see
// Orphans) and keep their addresses, and those outside their pool now keep
// the forwarding they were served with.
func (a *Allocator) SetPools(pools []*config.Pool) {
	for _, rec := range a.records {
		rec.served = a.served(rec)
	}
	a.pools = nil
	a.byName = map[string]*pool{}
	for _, cp := range pools {
		if cp == nil || a.byName[cp.Name] != nil {
			continue
		}
		p := &pool{Pool: cp}
		for _, r := range cp.Ranges {
			if !r.First.IsValid() || r.First.Is4() != r.Last.Is4() || r.Last.Less(r.First) {
				continue // config validates ranges; never trust a broken one
			}
			f := familyOf(r.First)
			p.spans[f] = append(p.spans[f], span{first: toU128(r.First), last: toU128(r.Last)})
		}
		for f := range p.spans {
			slices.SortFunc(p.spans[f], func(x, y span) int { return x.first.cmp(y.first) })
		}
		a.pools = append(a.pools, p)
		a.byName[cp.Name] = p
	}
}

// SetInUse replaces the addresses known to be in use on the link by a
// station which is no load-balancer host (the agents' address conflict
// detection). Picking a free address skips them; a Service that holds one
// keeps it, and one that asks for one by address gets it (the agents
// report the conflict; the address is not announced while it lasts).
func (a *Allocator) SetInUse(addrs []netip.Addr) {
	want := map[netip.Addr]bool{}
	for _, addr := range addrs {
		want[addr.Unmap()] = true
	}
	for addr := range a.inUse {
		if !want[addr] && a.held[addr] == nil {
			a.used[familyOf(addr)].remove(toU128(addr))
		}
	}
	for addr := range want {
		a.used[familyOf(addr)].insert(toU128(addr))
	}
	a.inUse = want
}

// Lookup returns the allocation of a Service.
func (a *Allocator) Lookup(key types.NamespacedName) (Allocation, bool) {
	rec, ok := a.records[key]
	if !ok {
		return Allocation{}, false
	}
	return rec.alloc.clone(), true
}

// Release frees the addresses of a Service. Services sharing them keep
// theirs. Releasing a Service that holds nothing does nothing.
func (a *Allocator) Release(key types.NamespacedName) {
	if rec, ok := a.records[key]; ok {
		a.unhold(key, rec)
	}
}

// Restore records an allocation read back from its durable record (the
// LoadBalancer object), as after a restart. The addresses need not lie in
// a pool (they become orphans), but a record that collides with another
// Service's — an address held without a matching sharing key, or a port
// used twice — is refused with an error and nothing is recorded, so that
// no address ever has two owners. Services of different namespaces that
// share an address under one key are restored even where the pool does not
// allow sharing across namespaces, or with different forwarding: they
// shared it before that rule (or before the pool's setting changed), and
// each keeps its address; no other Service joins them. Restoring a Service
// again replaces its record.
func (a *Allocator) Restore(key types.NamespacedName, alloc Allocation, t Terms) error {
	if err := checkRecord(key, alloc); err != nil {
		return fmt.Errorf("service %s: cannot restore: %w", key, err)
	}
	if msg := checkForwarding(t.Forwarding); msg != "" {
		return fmt.Errorf("service %s: cannot restore: %w: %s", key, ErrInvalidRequest, msg)
	}
	rec := &record{alloc: alloc.clone(), sharingKey: t.SharingKey, ports: normalizePorts(t.Ports), forwarding: t.Forwarding, served: t.Served}
	for _, addr := range rec.alloc.Addresses {
		if err := a.collision(addr, key, rec.sharingKey, rec.ports); err != nil {
			return fmt.Errorf("service %s: cannot restore: %w", key, err)
		}
	}
	if cur, ok := a.records[key]; ok {
		a.unhold(key, cur, rec.alloc.Addresses...)
	}
	a.hold(key, rec)
	return nil
}

func checkRecord(key types.NamespacedName, alloc Allocation) error {
	if key.Namespace == "" || key.Name == "" {
		return fmt.Errorf("%w: the key needs a namespace and a name", ErrInvalidRequest)
	}
	if len(alloc.Addresses) == 0 {
		return fmt.Errorf("%w: the record has no address", ErrInvalidRequest)
	}
	var seen [2]bool
	for _, addr := range alloc.Addresses {
		if msg := checkAddr(addr); msg != "" {
			return fmt.Errorf("%w: %s", ErrInvalidRequest, msg)
		}
		if f := familyOf(addr); seen[f] {
			return fmt.Errorf("%w: the record has more than one %s address", ErrInvalidRequest, f.ipFamily())
		} else {
			seen[f] = true
		}
	}
	return nil
}

// Usage reports, per pool in config order and per family the pool has,
// its size and how many of its addresses are held.
func (a *Allocator) Usage() []PoolUsage {
	var out []PoolUsage
	for _, p := range a.pools {
		for f, spans := range p.spans {
			if len(spans) == 0 {
				continue
			}
			u := PoolUsage{Pool: p.Name, Family: family(f).ipFamily()}
			for _, s := range spans {
				u.Size = addSaturating(u.Size, s.size())
				u.Used += uint64(a.used[f].countIn(s))
			}
			for addr := range a.inUse {
				if familyOf(addr) == family(f) && a.held[addr] == nil && p.contains(addr) {
					u.Used--
					u.InUse++
				}
			}
			out = append(out, u)
		}
	}
	return out
}

// conflict reports why req may not hold addr, served with forwarding fwd,
// given the other Services holding it: as collision, and besides a Service
// joins only Services of its own namespace unless the address's pool
// allows sharing across namespaces, and only Services that forward the
// address as it would (sameForwarding). A Service that holds addr already
// keeps it, whoever shares it: records restored from before sharing keys
// were scoped to a namespace must keep their addresses.
func (a *Allocator) conflict(addr netip.Addr, req *Request, fwd config.Forwarding) error {
	if err := a.foreignOwners(addr, req.Key, req.SharingKey); err != nil {
		return err
	}
	if err := a.collision(addr, req.Key, req.SharingKey, req.Ports); err != nil {
		return err
	}
	return a.sameForwarding(addr, req, fwd)
}

// foreignOwners refuses addr to key when Services of another namespace
// hold it and its pool does not allow sharing across namespaces. The
// message names neither those Services nor their sharing key.
func (a *Allocator) foreignOwners(addr netip.Addr, key types.NamespacedName, sharingKey string) error {
	h := a.held[addr]
	if h == nil || slices.Contains(h.owners, key) ||
		!slices.ContainsFunc(h.owners, func(o types.NamespacedName) bool { return o.Namespace != key.Namespace }) {
		return nil
	}
	p := a.poolContaining(addr)
	if p != nil && p.AllowCrossNamespaceSharing {
		return nil
	}
	hint := ""
	if sharingKey != "" && h.sharingKey != "" && p != nil {
		hint = fmt.Sprintf(" (sharing keys are scoped to their namespace; pool %q does not set allow-cross-namespace-sharing)", p.Name)
	}
	return fmt.Errorf("%w: %s is held by a Service of another namespace%s; choose another address",
		ErrAddressInUse, addr, hint)
}

// collision reports why key may not hold addr with sharingKey and ports
// beside the other Services holding it: an address is held by one Service,
// or by several with one sharing key and no port in common.
func (a *Allocator) collision(addr netip.Addr, key types.NamespacedName, sharingKey string, ports []Port) error {
	h := a.held[addr]
	if h == nil || (len(h.owners) == 1 && h.owners[0] == key) {
		return nil
	}
	switch {
	case h.sharingKey == "":
		return fmt.Errorf("%w: %s is held by %s, which does not allow sharing; choose another address, or set annotation %s to the same key on both Services",
			ErrAddressInUse, addr, ownerList(h.owners, key), annotation.AllowSharedIP)
	case sharingKey != h.sharingKey:
		return fmt.Errorf("%w: %s is held by %s with sharing key %q; choose another address, or set annotation %s to %q to share it",
			ErrAddressInUse, addr, ownerList(h.owners, key), h.sharingKey, annotation.AllowSharedIP, h.sharingKey)
	}
	for _, p := range ports {
		if o, ok := h.ports[p]; ok && o != key {
			return fmt.Errorf("%w: port %s on %s is used by %s (sharing key %q); use another port, or another address",
				ErrSharingConflict, p, addr, o, sharingKey)
		}
	}
	return nil
}

// ownerList names the owners other than key, for a message.
func ownerList(owners []types.NamespacedName, key types.NamespacedName) string {
	keys := slices.DeleteFunc(slices.Clone(owners), func(o types.NamespacedName) bool { return o == key })
	switch len(keys) {
	case 1:
		return keys[0].String()
	case 2:
		return keys[0].String() + " and " + keys[1].String()
	}
	return fmt.Sprintf("%s and %d other Services", keys[0], len(keys)-1)
}

// hold records rec for key, which holds nothing. The caller has checked
// that rec conflicts with no other Service.
func (a *Allocator) hold(key types.NamespacedName, rec *record) {
	a.records[key] = rec
	for _, addr := range rec.alloc.Addresses {
		h := a.held[addr]
		if h == nil {
			h = &holding{sharingKey: rec.sharingKey, ports: map[Port]types.NamespacedName{}}
			a.held[addr] = h
			a.used[familyOf(addr)].insert(toU128(addr))
			if rec.sharingKey != "" {
				if a.shared[rec.sharingKey] == nil {
					a.shared[rec.sharingKey] = map[netip.Addr]struct{}{}
				}
				a.shared[rec.sharingKey][addr] = struct{}{}
			}
		}
		i, _ := slices.BinarySearchFunc(h.owners, key, compareKeys)
		h.owners = slices.Insert(h.owners, i, key)
		for _, p := range rec.ports {
			h.ports[p] = key
		}
	}
}

// unhold forgets rec, which key holds. Addresses in keep are about to be
// held again: they stay in the sorted sets, which saves moving them.
func (a *Allocator) unhold(key types.NamespacedName, rec *record, keep ...netip.Addr) {
	delete(a.records, key)
	for _, addr := range rec.alloc.Addresses {
		h := a.held[addr]
		if i, ok := slices.BinarySearchFunc(h.owners, key, compareKeys); ok {
			h.owners = slices.Delete(h.owners, i, i+1)
		}
		for _, p := range rec.ports {
			if h.ports[p] == key {
				delete(h.ports, p)
			}
		}
		if len(h.owners) > 0 {
			continue
		}
		delete(a.held, addr)
		if !slices.Contains(keep, addr) && !a.inUse[addr] {
			a.used[familyOf(addr)].remove(toU128(addr))
		}
		if h.sharingKey != "" {
			delete(a.shared[h.sharingKey], addr)
			if len(a.shared[h.sharingKey]) == 0 {
				delete(a.shared, h.sharingKey)
			}
		}
	}
}

func compareKeys(x, y types.NamespacedName) int {
	return cmp.Or(strings.Compare(x.Namespace, y.Namespace), strings.Compare(x.Name, y.Name))
}

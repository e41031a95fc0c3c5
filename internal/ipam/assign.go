package ipam

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/groundcloud/groundcloud/internal/annotation"
	"github.com/groundcloud/groundcloud/internal/config"
)

// Assign gives the Service of req.Key addresses and returns them, with
// their pool. It is idempotent, and keeps the addresses the Service holds
// for as long as they satisfy its request. It is all-or-nothing: on error
// the Service keeps what it held and nothing else changes. The error wraps
// one of the Err* sentinels.
func (a *Allocator) Assign(req Request) (Allocation, error) {
	req, err := req.normalized()
	if err != nil {
		return Allocation{}, err
	}
	cur := a.records[req.Key]
	alloc, err := a.plan(&req, cur)
	if err != nil {
		return Allocation{}, fmt.Errorf("service %s: %w", req.Key, err)
	}
	if cur != nil {
		a.unhold(req.Key, cur, alloc.Addresses...)
	}
	rec := &record{alloc: alloc, sharingKey: req.SharingKey, ports: req.Ports, forwarding: req.Forwarding}
	if cur != nil {
		rec.served = cur.served // an orphan kept outside its pool
	}
	rec.served = a.served(rec)
	a.hold(req.Key, rec)
	return alloc.clone(), nil
}

// plan works out the allocation for req without changing anything. An
// orphan is adopted by the pool that now holds its addresses if there is
// one (a renamed pool, say); else it is kept as it is rather than moved.
func (a *Allocator) plan(req *Request, cur *record) (Allocation, error) {
	alloc, err := a.planInPools(req, cur)
	if cur != nil && (err != nil || moves(cur, alloc, req)) && a.isOrphan(req.Key, cur) {
		if kept, ok := a.keepOrphan(req, cur); ok {
			return kept, nil
		}
	}
	return alloc, err
}

// moves reports whether alloc drops an address of cur of a family req
// still wants.
func moves(cur *record, alloc Allocation, req *Request) bool {
	return slices.ContainsFunc(cur.alloc.Addresses, func(addr netip.Addr) bool {
		return slices.Contains(req.Families, familyOf(addr).ipFamily()) && !slices.Contains(alloc.Addresses, addr)
	})
}

// planInPools works out the allocation for req from the current pools.
func (a *Allocator) planInPools(req *Request, cur *record) (Allocation, error) {
	cands, err := a.candidates(req, cur)
	if err != nil {
		return Allocation{}, err
	}
	var partial *Allocation
	var misses []miss
	for _, p := range cands {
		addrs, missed, err := a.tryPool(req, cur, p)
		if err != nil {
			return Allocation{}, err
		}
		alloc := Allocation{Pool: p.Name, Addresses: addrs}
		if len(missed) == 0 {
			return alloc, nil
		}
		misses = append(misses, missed...)
		if req.FamilyPolicy != v1.IPFamilyPolicyPreferDualStack || len(addrs) == 0 {
			continue
		}
		if cur != nil && !moves(cur, alloc, req) {
			return alloc, nil // keep the addresses rather than move for a second family
		}
		if partial == nil || (!hasPrimary(*partial, req) && hasPrimary(alloc, req)) {
			partial = &alloc
		}
	}
	if partial != nil {
		return *partial, nil
	}
	return Allocation{}, a.missError(req, cands, misses)
}

func hasPrimary(alloc Allocation, req *Request) bool {
	return familyOf(alloc.Addresses[0]).ipFamily() == req.Families[0]
}

// keepOrphan keeps what an orphaned Service holds, less any family it no
// longer wants, if that still satisfies its request: a config edit must
// not move traffic.
func (a *Allocator) keepOrphan(req *Request, cur *record) (Allocation, bool) {
	if req.Pool != "" && req.Pool != cur.alloc.Pool {
		return Allocation{}, false
	}
	kept := inFamilyOrder(cur.alloc.Addresses, req.Families)
	if len(kept) == 0 || (req.FamilyPolicy != v1.IPFamilyPolicyPreferDualStack && len(kept) != len(req.Families)) {
		return Allocation{}, false
	}
	for _, want := range req.Addresses {
		if !slices.Contains(kept, want) {
			return Allocation{}, false
		}
	}
	fwd := a.served(&record{alloc: cur.alloc, forwarding: req.Forwarding, served: cur.served})
	for _, addr := range kept {
		if a.conflict(addr, req, fwd) != nil {
			return Allocation{}, false
		}
	}
	return Allocation{Pool: cur.alloc.Pool, Addresses: kept}, true
}

// inFamilyOrder returns the addresses of the given families, in their order.
func inFamilyOrder(addrs []netip.Addr, fams []v1.IPFamily) []netip.Addr {
	var out []netip.Addr
	for _, f := range fams {
		for _, addr := range addrs {
			if familyOf(addr).ipFamily() == f {
				out = append(out, addr)
			}
		}
	}
	return out
}

// candidates are the pools req may be given addresses from, in order of
// preference.
func (a *Allocator) candidates(req *Request, cur *record) ([]*pool, error) {
	ns := req.Key.Namespace
	switch {
	case req.Pool != "":
		p := a.byName[req.Pool]
		if p == nil {
			return nil, fmt.Errorf("%w: pool %q does not exist; set annotation %s to %s, or remove it to use an auto-assign pool",
				ErrUnknownPool, req.Pool, annotation.Pool, a.poolChoices(ns))
		}
		if !p.AllowsNamespace(ns) {
			return nil, fmt.Errorf("%w: pool %q does not allow namespace %q; set annotation %s to %s, or ask the cluster operator to add the namespace to the pool",
				ErrNamespaceNotAllowed, p.Name, ns, annotation.Pool, a.poolChoices(ns))
		}
		return []*pool{p}, nil
	case len(req.Addresses) > 0:
		return a.requestedPool(req)
	}
	return a.autoPools(req, cur)
}

// requestedPool is the pool holding the requested addresses.
func (a *Allocator) requestedPool(req *Request) ([]*pool, error) {
	ns := req.Key.Namespace
	var p *pool
	for _, addr := range req.Addresses {
		q := a.poolContaining(addr)
		if q == nil {
			return nil, fmt.Errorf("%w: %s is in no address pool; request an address of %s, or remove annotation %s",
				ErrNotInPool, addr, a.rangeChoices(ns), annotation.LoadBalancerIPs)
		}
		if p != nil && q != p {
			return nil, fmt.Errorf("%w: requested addresses %s (pool %q) and %s (pool %q) lie in different pools; request addresses of one pool",
				ErrInvalidRequest, req.Addresses[0], p.Name, addr, q.Name)
		}
		p = q
	}
	if !p.AllowsNamespace(ns) {
		return nil, fmt.Errorf("%w: %s is in pool %q, which does not allow namespace %q; request an address of %s, or ask the cluster operator to add the namespace to the pool",
			ErrNamespaceNotAllowed, req.Addresses[0], p.Name, ns, a.rangeChoices(ns))
	}
	return []*pool{p}, nil
}

func (a *Allocator) poolContaining(addr netip.Addr) *pool {
	for _, p := range a.pools {
		if p.contains(addr) {
			return p
		}
	}
	return nil
}

// autoPools are, for a request naming neither pool nor address: the pool
// the Service is in and those that now hold the addresses it keeps, then the
// auto-assign pools that allow its namespace in config order — those where
// its sharing key holds an address it may share first.
func (a *Allocator) autoPools(req *Request, cur *record) ([]*pool, error) {
	ns := req.Key.Namespace
	var cands, sharing, rest []*pool
	if cur != nil {
		if p := a.byName[cur.alloc.Pool]; p != nil && p.AllowsNamespace(ns) {
			cands = append(cands, p)
		}
		for _, addr := range inFamilyOrder(cur.alloc.Addresses, req.Families) {
			if p := a.poolContaining(addr); p != nil && p.AllowsNamespace(ns) && !slices.Contains(cands, p) {
				cands = append(cands, p)
			}
		}
	}
	anyAuto := false
	for _, p := range a.pools {
		if !p.AutoAssign {
			continue
		}
		anyAuto = true
		switch {
		case !p.AllowsNamespace(ns) || slices.Contains(cands, p):
		case req.SharingKey != "" && a.sharesIn(req, p):
			sharing = append(sharing, p)
		default:
			rest = append(rest, p)
		}
	}
	cands = append(append(cands, sharing...), rest...)
	switch {
	case len(cands) > 0:
		return cands, nil
	case !anyAuto:
		return nil, fmt.Errorf("%w: no pool is auto-assign; set annotation %s to %s, or ask the cluster operator to make a pool auto-assign",
			ErrUnknownPool, annotation.Pool, a.poolChoices(ns))
	}
	return nil, fmt.Errorf("%w: no auto-assign pool allows namespace %q; set annotation %s to %s, or ask the cluster operator to add the namespace to a pool",
		ErrNamespaceNotAllowed, ns, annotation.Pool, a.poolChoices(ns))
}

// sharesIn reports whether p has an address req may share.
func (a *Allocator) sharesIn(req *Request, p *pool) bool {
	for _, f := range req.Families {
		if _, ok := a.lowestShared(req, p, familyIndex(f)); ok {
			return true
		}
	}
	return false
}

type miss struct {
	pool      *pool
	family    family
	exhausted bool // the pool has addresses of the family, none free
}

// tryPool picks an address of p for each family of req. An error is final:
// a requested address cannot be had.
func (a *Allocator) tryPool(req *Request, cur *record, p *pool) ([]netip.Addr, []miss, error) {
	var addrs []netip.Addr
	var missed []miss
	for _, fam := range req.Families {
		f := familyIndex(fam)
		if want, ok := requested(req, f); ok {
			if !p.contains(want) {
				return nil, nil, fmt.Errorf("%w: %s is not in pool %q (%s); request an address of the pool, or remove annotation %s",
					ErrNotInPool, want, p.Name, rangeList(p.Pool), annotation.Pool)
			}
			if err := a.conflict(want, req, req.forwardingIn(p)); err != nil {
				return nil, nil, err
			}
			addrs = append(addrs, want)
			continue
		}
		if addr, ok := a.pick(req, cur, p, f); ok {
			addrs = append(addrs, addr)
			continue
		}
		missed = append(missed, miss{pool: p, family: f, exhausted: len(p.spans[f]) > 0})
	}
	return addrs, missed, nil
}

func requested(req *Request, f family) (netip.Addr, bool) {
	for _, addr := range req.Addresses {
		if familyOf(addr) == f {
			return addr, true
		}
	}
	return netip.Addr{}, false
}

// pick chooses an address of family f in p: the one the Service holds if
// it still may; else the lowest one its sharing key holds that it may
// share; else the lowest free one.
func (a *Allocator) pick(req *Request, cur *record, p *pool, f family) (netip.Addr, bool) {
	// An address in use by another station, of a pool that moves such
	// Services: kept only when there is nothing else to take.
	var fallback netip.Addr
	if cur != nil {
		for _, addr := range cur.alloc.Addresses {
			if familyOf(addr) == f && p.contains(addr) && a.conflict(addr, req, req.forwardingIn(p)) == nil {
				if a.movesAway(addr, p) {
					fallback = addr
					continue
				}
				return addr, true
			}
		}
	}
	if req.SharingKey != "" {
		if addr, ok := a.lowestShared(req, p, f); ok {
			return addr, true
		}
	}
	for _, s := range p.spans[f] {
		if u, ok := a.used[f].firstFree(s); ok {
			return u.addr(f), true
		}
	}
	return fallback, fallback.IsValid()
}

// movesAway reports whether a Service holding addr, which it did not ask
// for, is to be given another address of p: addr is in use by another
// station and p moves such Services (address-conflict = move).
func (a *Allocator) movesAway(addr netip.Addr, p *pool) bool {
	return a.inUse[addr] && p.AddressConflict == config.AddressConflictMove
}

// MovesAway reports whether the Service key holds an address that Assign
// would move (see movesAway), unless it asks for that address.
func (a *Allocator) MovesAway(key types.NamespacedName) bool {
	rec := a.records[key]
	if rec == nil {
		return false
	}
	for _, addr := range rec.alloc.Addresses {
		if p := a.poolContaining(addr); p != nil && a.movesAway(addr, p) {
			return true
		}
	}
	return false
}

// lowestShared is the lowest address of family f in p that another
// Service holds under req's sharing key and req may share.
func (a *Allocator) lowestShared(req *Request, p *pool, f family) (netip.Addr, bool) {
	var best netip.Addr
	for addr := range a.shared[req.SharingKey] {
		if familyOf(addr) != f || (best.IsValid() && best.Less(addr)) || !p.contains(addr) {
			continue
		}
		if h := a.held[addr]; (len(h.owners) == 1 && h.owners[0] == req.Key) || a.movesAway(addr, p) {
			continue
		}
		if a.conflict(addr, req, req.forwardingIn(p)) == nil {
			best = addr
		}
	}
	return best, best.IsValid()
}

// missError explains why no candidate pool could give req what it needs.
func (a *Allocator) missError(req *Request, cands []*pool, misses []miss) error {
	ns := req.Key.Namespace
	if i := slices.IndexFunc(misses, func(m miss) bool { return m.exhausted }); i >= 0 {
		m := misses[i]
		if len(cands) == 1 {
			return fmt.Errorf("%w: pool %q has no free %s address (all %d are held); delete unused LoadBalancer Services, use another pool, or ask the cluster operator to add addresses to it",
				ErrPoolExhausted, m.pool.Name, m.family.ipFamily(), a.size(m.pool, m.family))
		}
		return fmt.Errorf("%w: no free %s address in pools %s (those namespace %q may use); delete unused LoadBalancer Services, or ask the cluster operator to add addresses",
			ErrPoolExhausted, m.family.ipFamily(), poolNames(cands), ns)
	}
	what := misses[0].family.ipFamily() + " addresses"
	if slices.ContainsFunc(misses, func(m miss) bool { return m.family != misses[0].family }) {
		what = "both IPv4 and IPv6 addresses"
		if len(cands) == 1 || req.FamilyPolicy == v1.IPFamilyPolicyPreferDualStack {
			what = "addresses of either family"
		}
	}
	fix := "set spec.ipFamilyPolicy to PreferDualStack"
	if req.FamilyPolicy != v1.IPFamilyPolicyRequireDualStack {
		fix = "change spec.ipFamilies"
	}
	if len(cands) == 1 {
		return fmt.Errorf("%w: pool %q has no %s; use a pool that has, or %s",
			ErrFamilyUnavailable, cands[0].Name, what, fix)
	}
	return fmt.Errorf("%w: none of pools %s (those namespace %q may use) has %s; name a pool that has with annotation %s, or %s",
		ErrFamilyUnavailable, poolNames(cands), ns, what, annotation.Pool, fix)
}

func (a *Allocator) size(p *pool, f family) uint64 {
	var n uint64
	for _, s := range p.spans[f] {
		n = addSaturating(n, s.size())
	}
	return n
}

func poolNames(pools []*pool) string {
	names := make([]string, len(pools))
	for i, p := range pools {
		names[i] = fmt.Sprintf("%q", p.Name)
	}
	return strings.Join(names, ", ")
}

// poolChoices names the pools namespace ns may use, for a message.
func (a *Allocator) poolChoices(ns string) string {
	var ok []*pool
	for _, p := range a.pools {
		if p.AllowsNamespace(ns) {
			ok = append(ok, p)
		}
	}
	if len(ok) == 0 {
		return fmt.Sprintf("a pool that allows namespace %q (there is none yet)", ns)
	}
	return "one of " + poolNames(ok)
}

// rangeChoices names the pools namespace ns may use and their ranges.
func (a *Allocator) rangeChoices(ns string) string {
	var parts []string
	for _, p := range a.pools {
		if p.AllowsNamespace(ns) {
			parts = append(parts, fmt.Sprintf("pool %q (%s)", p.Name, rangeList(p.Pool)))
		}
	}
	if len(parts) == 0 {
		return fmt.Sprintf("a pool that allows namespace %q (there is none yet)", ns)
	}
	return strings.Join(parts, ", ")
}

// rangeList is p's ranges for a message, the first few of them.
func rangeList(p *config.Pool) string {
	const most = 4
	var parts []string
	for i, r := range p.Ranges {
		if i == most {
			parts = append(parts, fmt.Sprintf("and %d more", len(p.Ranges)-most))
			break
		}
		parts = append(parts, r.String())
	}
	if len(parts) == 0 {
		return "no addresses"
	}
	return strings.Join(parts, ", ")
}

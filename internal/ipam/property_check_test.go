package ipam

import (
	"errors"
	"net/netip"
	"slices"
	"strings"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/groundcloud/groundcloud/internal/config"
)

// The checks TestProperties makes after each operation.

// compatible reports whether k may hold addr with the request's sharing
// key and ports, per the model: Services of another namespace hold it only
// if k holds it already or its pool allows sharing across namespaces.
func (m *propModel) compatible(holders map[netip.Addr][]types.NamespacedName, addr netip.Addr, k types.NamespacedName, sharing string, ports []Port) bool {
	joining := !slices.Contains(holders[addr], k)
	for _, o := range holders[addr] {
		if o == k {
			continue
		}
		if joining && o.Namespace != k.Namespace && !m.crossNamespace(addr) {
			return false
		}
		rec := m.records[o]
		if sharing == "" || rec.sharing != sharing {
			return false
		}
		for _, p := range ports {
			if slices.Contains(rec.ports, p) {
				return false
			}
		}
	}
	return true
}

// crossNamespace reports whether the pool holding addr allows sharing
// across namespaces.
func (m *propModel) crossNamespace(addr netip.Addr) bool {
	p := m.pool(m.poolOf(addr))
	return p != nil && p.AllowCrossNamespaceSharing
}

func (m *propModel) pool(name string) *config.Pool {
	for _, p := range m.pools {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// valid reports whether alloc lies in a pool that allows the namespace.
func (m *propModel) valid(ns string, alloc Allocation) bool {
	p := m.pool(alloc.Pool)
	if p == nil || !p.AllowsNamespace(ns) {
		return false
	}
	for _, addr := range alloc.Addresses {
		if !p.Contains(addr) {
			return false
		}
	}
	return true
}

func (m *propModel) checkSuccess(req Request, prev *modelRecord, got Allocation) {
	k := req.Key
	if l, ok := m.a.Lookup(k); !ok || !equalAlloc(l, got) {
		m.fatalf("Lookup(%s) = %v, Assign returned %v", k, l, got)
	}
	if want := inFamilyOrder(got.Addresses, req.Families); len(got.Addresses) == 0 || !slices.Equal(want, got.Addresses) {
		m.fatalf("%s: %v is not in the order of families %v", k, got, req.Families)
	}
	if req.FamilyPolicy != prefer && len(got.Addresses) != len(req.Families) {
		m.fatalf("%s: %v does not have families %v", k, got, req.Families)
	}
	for _, want := range req.Addresses {
		if !slices.Contains(got.Addresses, want) {
			m.fatalf("%s: %v lacks requested %s", k, got, want)
		}
	}
	if req.Pool != "" && got.Pool != req.Pool {
		m.fatalf("%s: %v is not from named pool %s", k, got, req.Pool)
	}
	if !m.valid(k.Namespace, got) {
		if prev == nil || got.Pool != prev.alloc.Pool || slices.ContainsFunc(got.Addresses, func(a netip.Addr) bool { return !slices.Contains(prev.alloc.Addresses, a) }) {
			m.fatalf("%s: %v is neither in a pool it may use nor its kept orphan %v", k, got, prev)
		}
		m.stats["orphan kept"]++
	}
	moved := prev != nil && slices.ContainsFunc(prev.alloc.Addresses, func(a netip.Addr) bool {
		return slices.Contains(req.Families, familyOf(a).ipFamily()) && !slices.Contains(got.Addresses, a)
	})
	if moved {
		m.stats["moved"]++
		if prev.req.Key == req.Key && equalRequest(prev.req, req) {
			m.fatalf("%s: moved with an unchanged request: %v -> %v", k, prev.alloc, got)
		}
	}
	kept := prev != nil && (prev.alloc.Pool == got.Pool || slices.ContainsFunc(got.Addresses, func(a netip.Addr) bool { return slices.Contains(prev.alloc.Addresses, a) }))
	if p := m.pool(got.Pool); p != nil && req.Pool == "" && len(req.Addresses) == 0 && !p.AutoAssign && !kept {
		m.fatalf("%s: auto-assigned %v from a pool that is not auto-assign", k, got)
	}
	holders := m.holders() // before the Assign: m.records is not updated yet
	for _, addr := range got.Addresses {
		if !m.compatible(holders, addr, k, req.SharingKey, req.Ports) {
			m.fatalf("%s: took %s, which %v hold and it may not share", k, addr, holders[addr])
		}
		if slices.ContainsFunc(holders[addr], func(o types.NamespacedName) bool { return o.Namespace != k.Namespace }) {
			m.stats["shared across namespaces"]++
		}
	}
	m.checkPicks(req, prev, got)
	m.stats["assign ok"]++
}

// checkPicks checks every address Assign newly picked: a shared one only
// with a matching key, a free one only when no shared one would do, and
// then the lowest free one of its pool.
func (m *propModel) checkPicks(req Request, prev *modelRecord, got Allocation) {
	holders := m.holders() // before the Assign: m.records is not updated yet
	p := m.pool(got.Pool)
	for _, addr := range got.Addresses {
		if slices.Contains(req.Addresses, addr) || (prev != nil && slices.Contains(prev.alloc.Addresses, addr)) || p == nil {
			continue
		}
		if len(holders[addr]) > 0 {
			m.stats["auto-assign shared"]++
			continue
		}
		for x := range m.poolAddrs(p, familyOf(addr)) {
			if req.SharingKey != "" && len(holders[x]) > 0 && m.records[holders[x][0]].sharing == req.SharingKey &&
				m.compatible(holders, x, req.Key, req.SharingKey, req.Ports) {
				m.fatalf("%s: picked free %s over %s, which its sharing key holds", req.Key, addr, x)
			}
			if x.Less(addr) && len(holders[x]) == 0 {
				m.fatalf("%s: picked %s, but %s is lower and free", req.Key, addr, x)
			}
		}
	}
}

// poolAddrs yields the addresses of family f in p, in address order, the
// first 64 of each range.
func (m *propModel) poolAddrs(p *config.Pool, f family) func(func(netip.Addr) bool) {
	rs := slices.Clone(p.Ranges)
	slices.SortFunc(rs, func(x, y config.AddrRange) int { return x.First.Compare(y.First) })
	return func(yield func(netip.Addr) bool) {
		for _, r := range rs {
			if familyOf(r.First) != f {
				continue
			}
			for i, x := 0, r.First; i < 64 && x.IsValid() && !r.Last.Less(x); i, x = i+1, x.Next() {
				if !yield(x) {
					return
				}
			}
		}
	}
}

var sentinels = []error{ErrInvalidRequest, ErrUnknownPool, ErrNamespaceNotAllowed, ErrNotInPool, ErrAddressInUse, ErrSharingConflict, ErrFamilyUnavailable, ErrPoolExhausted}

// checkFailure checks that a failed Assign changed nothing and that the
// state before it justifies the error.
func (m *propModel) checkFailure(req Request, prev *modelRecord, err error) {
	k := req.Key
	l, ok := m.a.Lookup(k)
	if (prev == nil) == ok || (ok && !equalAlloc(l, prev.alloc)) {
		m.fatalf("failed Assign(%s) changed its allocation: %v, was %v", k, l, prev)
	}
	kind := slices.IndexFunc(sentinels, func(s error) bool { return errors.Is(err, s) })
	if kind < 0 || !strings.HasPrefix(err.Error(), "service "+k.String()+": ") {
		m.fatalf("Assign(%s): error %q wraps no sentinel or does not name the Service", k, err)
	}
	m.stats[sentinels[kind].Error()]++
	holders := m.holders()
	reqPool := m.pool(req.Pool)
	var why bool
	switch sentinels[kind] {
	case ErrUnknownPool:
		why = (req.Pool != "" && reqPool == nil) || (req.Pool == "" && len(req.Addresses) == 0 && !slices.ContainsFunc(m.pools, func(p *config.Pool) bool { return p.AutoAssign }))
	case ErrNamespaceNotAllowed:
		why = (reqPool != nil && !reqPool.AllowsNamespace(k.Namespace)) ||
			slices.ContainsFunc(req.Addresses, func(a netip.Addr) bool {
				return slices.ContainsFunc(m.pools, func(p *config.Pool) bool { return p.Contains(a) && !p.AllowsNamespace(k.Namespace) })
			}) ||
			(req.Pool == "" && len(req.Addresses) == 0 && len(m.autoCandidates(req, prev)) == 0)
	case ErrNotInPool:
		why = slices.ContainsFunc(req.Addresses, func(a netip.Addr) bool {
			return (reqPool != nil && !reqPool.Contains(a)) || !slices.ContainsFunc(m.pools, func(p *config.Pool) bool { return p.Contains(a) })
		})
	case ErrAddressInUse, ErrSharingConflict:
		why = slices.ContainsFunc(req.Addresses, func(a netip.Addr) bool { return !m.compatible(holders, a, k, req.SharingKey, req.Ports) })
	case ErrInvalidRequest:
		why = len(req.Addresses) == 2 && m.poolOf(req.Addresses[0]) != m.poolOf(req.Addresses[1])
	case ErrFamilyUnavailable, ErrPoolExhausted:
		why = m.noPoolFits(req, prev, holders, sentinels[kind] == ErrPoolExhausted)
	}
	if !why {
		m.fatalf("Assign(%s) failed with %v, which the state does not justify; request %+v", k, err, req)
	}
}

func (m *propModel) poolOf(a netip.Addr) string {
	for _, p := range m.pools {
		if p.Contains(a) {
			return p.Name
		}
	}
	return ""
}

// autoCandidates are the pools a request naming no pool and no address may
// use: its current pool, and the auto-assign pools of its namespace.
func (m *propModel) autoCandidates(req Request, prev *modelRecord) []*config.Pool {
	var out []*config.Pool
	for _, p := range m.pools {
		if p.AllowsNamespace(req.Key.Namespace) && (p.AutoAssign || (prev != nil && prev.alloc.Pool == p.Name)) {
			out = append(out, p)
		}
	}
	return out
}

// noPoolFits checks, for a single-stack request without requested
// addresses, that no candidate pool has an address the request may take:
// exhausted says some candidate has the family, all of its addresses held
// and none sharable. Other requests are not judged.
func (m *propModel) noPoolFits(req Request, prev *modelRecord, holders map[netip.Addr][]types.NamespacedName, exhausted bool) bool {
	if req.FamilyPolicy != single || len(req.Addresses) > 0 {
		return true
	}
	cands := m.autoCandidates(req, prev)
	if req.Pool != "" {
		cands = []*config.Pool{m.pool(req.Pool)}
	}
	f := familyIndex(req.Families[0])
	hasFamily := false
	for _, p := range cands {
		for x := range m.poolAddrs(p, f) {
			hasFamily = true
			if len(holders[x]) == 0 || m.compatible(holders, x, req.Key, req.SharingKey, req.Ports) {
				return false
			}
		}
	}
	return hasFamily == exhausted
}

// checkInvariants checks the Allocator against the model's records.
func (m *propModel) checkInvariants() {
	holders := m.holders()
	for addr, ks := range holders {
		for i, k := range ks {
			rec := m.records[k]
			if i > 0 && (rec.sharing == "" || rec.sharing != m.records[ks[0]].sharing) {
				m.fatalf("%s is shared by %v without one sharing key", addr, ks)
			}
			for _, o := range ks[:i] {
				for _, p := range rec.ports {
					if slices.Contains(m.records[o].ports, p) {
						m.fatalf("%s %s has two owners: %s and %s", addr, p, o, k)
					}
				}
			}
		}
	}
	for _, k := range m.keys {
		l, ok := m.a.Lookup(k)
		rec := m.records[k]
		if ok != (rec != nil) || (ok && !equalAlloc(l, rec.alloc)) {
			m.fatalf("Lookup(%s) = %v, %v; model has %v", k, l, ok, rec)
		}
	}
	m.checkOrphans()
	m.checkUsage(holders)
	m.checkIndexes(holders)
}

func (m *propModel) checkOrphans() {
	var want []types.NamespacedName
	for k, rec := range m.records {
		if !m.valid(k.Namespace, rec.alloc) {
			want = append(want, k)
		}
	}
	slices.SortFunc(want, compareKeys)
	var got []types.NamespacedName
	for _, o := range m.a.Orphans() {
		got = append(got, o.Key)
		if o.Reason == "" {
			m.fatalf("orphan %s without a reason", o.Key)
		}
	}
	if !slices.Equal(want, got) {
		m.fatalf("Orphans() = %v, want %v", got, want)
	}
	for _, k := range m.keys {
		if _, ok := m.a.OrphanOf(k); ok != slices.Contains(want, k) {
			m.fatalf("OrphanOf(%s) = %v, Orphans() = %v", k, ok, got)
		}
	}
	if len(got) > 0 {
		m.stats["steps with orphans"]++
	}
}

func (m *propModel) checkUsage(holders map[netip.Addr][]types.NamespacedName) {
	var want []PoolUsage
	for _, p := range m.pools {
		for _, f := range []v1.IPFamily{v4, v6} {
			u := PoolUsage{Pool: p.Name, Family: f}
			for _, r := range p.Ranges {
				if familyOf(r.First).ipFamily() == f {
					u.Size = addSaturating(u.Size, r.Size())
				}
			}
			if u.Size > 0 {
				want = append(want, u)
			}
		}
	}
	for addr := range holders {
		name := m.poolOf(addr)
		for i := range want {
			if want[i].Pool == name && want[i].Family == familyOf(addr).ipFamily() {
				want[i].Used++
			}
		}
	}
	if got := m.a.Usage(); !slices.Equal(want, got) {
		m.fatalf("Usage (-want +got):\n%s", cmp.Diff(want, got))
	}
}

func equalAlloc(x, y Allocation) bool {
	return x.Pool == y.Pool && slices.Equal(x.Addresses, y.Addresses)
}

func equalRequest(x, y Request) bool {
	return x.Key == y.Key && x.Pool == y.Pool && slices.Equal(x.Families, y.Families) && x.FamilyPolicy == y.FamilyPolicy &&
		slices.Equal(x.Addresses, y.Addresses) && x.SharingKey == y.SharingKey && slices.Equal(x.Ports, y.Ports)
}

// checkIndexes checks the Allocator's indexes against the model.
func (m *propModel) checkIndexes(holders map[netip.Addr][]types.NamespacedName) {
	a := m.a
	if len(a.records) != len(m.records) || len(a.held) != len(holders) {
		m.fatalf("allocator has %d records and %d held addresses; model %d and %d", len(a.records), len(a.held), len(m.records), len(holders))
	}
	var nused [2]int
	nshared := 0
	for addr, ks := range holders {
		h := a.held[addr]
		if h == nil || !slices.Equal(h.owners, ks) || h.sharingKey != m.records[ks[0]].sharing {
			m.fatalf("held[%s] = %+v; model owners %v", addr, h, ks)
		}
		nports := 0
		for _, k := range ks {
			for _, p := range m.records[k].ports {
				nports++
				if h.ports[p] != k {
					m.fatalf("held[%s].ports[%s] = %s, want %s", addr, p, h.ports[p], k)
				}
			}
		}
		if nports != len(h.ports) {
			m.fatalf("held[%s] has %d ports, want %d", addr, len(h.ports), nports)
		}
		if s := h.sharingKey; s != "" {
			nshared++
			if _, ok := a.shared[s][addr]; !ok {
				m.fatalf("shared[%s] lacks %s", s, addr)
			}
		}
		nused[familyOf(addr)]++
	}
	for addr := range a.inUse {
		if holders[addr] == nil {
			nused[familyOf(addr)]++
		}
	}
	for f, set := range a.used {
		for i, u := range set {
			if i > 0 && set[i-1].cmp(u) >= 0 {
				m.fatalf("used[%d] is not sorted: %v", f, set)
			}
			if holders[u.addr(family(f))] == nil && !a.inUse[u.addr(family(f))] {
				m.fatalf("used[%d] has %s, which nobody holds and nobody uses", f, u.addr(family(f)))
			}
		}
		if len(set) != nused[f] {
			m.fatalf("used[%d] has %d addresses, want %d", f, len(set), nused[f])
		}
	}
	for _, set := range a.shared {
		nshared -= len(set)
	}
	if nshared != 0 {
		m.fatalf("shared index has %d addresses too many", -nshared)
	}
}

// checkCoverage fails when the random operations missed a case the test
// means to cover: a change of seed or weights must not quietly hollow it.
func (m *propModel) checkCoverage() {
	for _, want := range []string{
		"assign ok", "release", "reload", "restart", "colliding restore", "re-ensure", "re-ensure gained a family",
		"moved", "orphan kept", "steps with orphans", "auto-assign shared", "invalid service", "shared across namespaces",
	} {
		if m.stats[want] == 0 {
			m.t.Errorf("no %q in %d operations", want, propertyOps)
		}
	}
	for _, s := range sentinels {
		if m.stats[s.Error()] == 0 {
			m.t.Errorf("no Assign failed with %v in %d operations", s, propertyOps)
		}
	}
}

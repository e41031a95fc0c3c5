package ipam

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/types"
)

// Orphan is an allocation the current pools would no longer grant. It is
// kept, and its addresses stay taken, until its Service is released or
// asks for something it does not satisfy.
type Orphan struct {
	Key        types.NamespacedName
	Allocation Allocation
	Cause      OrphanCause
	Reason     string // the cause, with the pool, namespace or address
}

// OrphanCause is why the current pools would not grant an allocation. Its
// values are CamelCase, fit for a condition's reason.
type OrphanCause string

const (
	// OrphanPoolNotConfigured: the allocation's pool is gone from the
	// cloud-config (removed or renamed).
	OrphanPoolNotConfigured OrphanCause = "PoolNotConfigured"
	// OrphanNamespaceNotAllowed: the pool no longer allows the Service's
	// namespace.
	OrphanNamespaceNotAllowed OrphanCause = "NamespaceNotAllowed"
	// OrphanAddressNotInPool: the pool no longer contains one of the
	// addresses (it shrank, or the range moved to another pool).
	OrphanAddressNotInPool OrphanCause = "AddressNotInPool"
)

// Orphans lists the allocations, sorted by Service, that the current pools
// would no longer grant: their pool is gone, no longer allows their
// namespace, or no longer contains one of their addresses.
func (a *Allocator) Orphans() []Orphan {
	var out []Orphan
	for key, rec := range a.records {
		if o, ok := a.orphan(key, rec); ok {
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(x, y Orphan) int { return compareKeys(x.Key, y.Key) })
	return out
}

// OrphanOf reports whether the Service's allocation is an orphan, and
// which. It costs what one Lookup does, so callers may ask after every
// Assign.
func (a *Allocator) OrphanOf(key types.NamespacedName) (Orphan, bool) {
	rec, ok := a.records[key]
	if !ok {
		return Orphan{}, false
	}
	return a.orphan(key, rec)
}

func (a *Allocator) orphan(key types.NamespacedName, rec *record) (Orphan, bool) {
	cause, reason := a.orphanCause(key, rec)
	if cause == "" {
		return Orphan{}, false
	}
	return Orphan{Key: key, Allocation: rec.alloc.clone(), Cause: cause, Reason: reason}, true
}

func (a *Allocator) orphanCause(key types.NamespacedName, rec *record) (OrphanCause, string) {
	p := a.byName[rec.alloc.Pool]
	switch {
	case p == nil:
		return OrphanPoolNotConfigured, fmt.Sprintf("pool %q is not configured", rec.alloc.Pool)
	case !p.AllowsNamespace(key.Namespace):
		return OrphanNamespaceNotAllowed, fmt.Sprintf("pool %q does not allow namespace %q", p.Name, key.Namespace)
	}
	for _, addr := range rec.alloc.Addresses {
		if !p.contains(addr) {
			return OrphanAddressNotInPool, fmt.Sprintf("%s is not in pool %q", addr, p.Name)
		}
	}
	return "", ""
}

func (a *Allocator) isOrphan(key types.NamespacedName, rec *record) bool {
	cause, _ := a.orphanCause(key, rec)
	return cause != ""
}

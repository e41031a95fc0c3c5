package loadbalancers

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/ipam"
)

// What the controller manager reports about orphans (ipam.Orphan): an
// AddressOrphaned condition on the LoadBalancer while it is one, and an
// Event on the Service when that changes. This file is pure; orphanreport.go
// writes.

// Event reasons on the Service.
const (
	ReasonAddressOrphaned       = "AddressOrphaned"
	ReasonAddressOrphanResolved = "AddressOrphanResolved"
)

// orphanDocs is where an operator reads how to resolve an orphan.
const orphanDocs = "docs/controller-manager.md#orphaned-addresses"

// orphanMessage says what is kept, why, and what resolves it.
func orphanMessage(o ipam.Orphan) string {
	return fmt.Sprintf("%s kept outside the pools: %s. The Service keeps serving on it and no other Service gets it. "+
		"To resolve: add it back to a pool namespace %q may use, give the Service another address or pool, or delete the Service (%s)",
		addressList(o.Allocation.Addresses), o.Reason, o.Key.Namespace, orphanDocs)
}

func addressList(addrs []netip.Addr) string {
	s := make([]string, len(addrs))
	for i, a := range addrs {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
}

// orphanCondition is the AddressOrphaned condition for o. A condition that
// was true already keeps its transition time.
func orphanCondition(o ipam.Orphan, cur *metav1.Condition, now metav1.Time) metav1.Condition {
	c := metav1.Condition{
		Type:               v1alpha1.ConditionAddressOrphaned,
		Status:             metav1.ConditionTrue,
		Reason:             string(o.Cause),
		Message:            orphanMessage(o),
		LastTransitionTime: now,
	}
	if cur != nil && cur.Status == metav1.ConditionTrue {
		c.LastTransitionTime = cur.LastTransitionTime
	}
	return c
}

// orphanChange is a status write for one LoadBalancer: its AddressOrphaned
// condition set, or (nil) removed.
type orphanChange struct {
	lb        *v1alpha1.LoadBalancer
	condition *metav1.Condition
}

// planOrphanConditions returns the writes that make each LoadBalancer's
// AddressOrphaned condition say what orphans says, and the orphans whose
// LoadBalancer is not (yet) among lbs. written holds, by UID, what was
// written to LoadBalancers since lbs were read (nil: removed); it takes
// precedence over what they say, so that nothing is written twice while the
// cache is behind.
func planOrphanConditions(orphans []ipam.Orphan, lbs []*v1alpha1.LoadBalancer, written map[types.UID]*metav1.Condition, now metav1.Time) (changes []orphanChange, missing []types.NamespacedName) {
	byKey := make(map[types.NamespacedName]ipam.Orphan, len(orphans))
	for _, o := range orphans {
		byKey[o.Key] = o
	}
	seen := map[types.NamespacedName]bool{}
	for _, lb := range lbs {
		key := types.NamespacedName{Namespace: lb.Namespace, Name: lb.Name}
		seen[key] = true
		cur := meta.FindStatusCondition(lb.Status.Conditions, v1alpha1.ConditionAddressOrphaned)
		if w, ok := written[lb.UID]; ok {
			cur = w
		}
		o, orphaned := byKey[key]
		switch {
		case orphaned:
			want := orphanCondition(o, cur, now)
			if !sameCondition(cur, &want) {
				changes = append(changes, orphanChange{lb: lb, condition: &want})
			}
		case cur != nil:
			changes = append(changes, orphanChange{lb: lb})
		}
	}
	for _, o := range orphans {
		if !seen[o.Key] {
			missing = append(missing, o.Key)
		}
	}
	slices.SortFunc(changes, func(a, b orphanChange) int { return compareKeys(a.lb, b.lb) })
	return changes, missing
}

// sameCondition reports whether have says what want says (the transition
// time aside).
func sameCondition(have, want *metav1.Condition) bool {
	return have != nil && have.Status == want.Status && have.Reason == want.Reason && have.Message == want.Message
}

// orphanedAddresses counts, per pool of the allocation, the addresses that
// orphans hold (an address shared by several counts once).
func orphanedAddresses(orphans []ipam.Orphan) map[string]int {
	seen := map[string]map[netip.Addr]bool{}
	for _, o := range orphans {
		p := o.Allocation.Pool
		if seen[p] == nil {
			seen[p] = map[netip.Addr]bool{}
		}
		for _, a := range o.Allocation.Addresses {
			seen[p][a] = true
		}
	}
	out := make(map[string]int, len(seen))
	for p, addrs := range seen {
		out[p] = len(addrs)
	}
	return out
}

// orphanTransitions compares the orphans with those of the last report:
// those new or changed, and the Services no longer orphaned.
func orphanTransitions(last map[types.NamespacedName]ipam.Orphan, orphans []ipam.Orphan) (changed []ipam.Orphan, resolved []types.NamespacedName) {
	now := make(map[types.NamespacedName]bool, len(orphans))
	for _, o := range orphans {
		now[o.Key] = true
		if prev, ok := last[o.Key]; !ok || !sameOrphan(prev, o) {
			changed = append(changed, o)
		}
	}
	for k := range last {
		if !now[k] {
			resolved = append(resolved, k)
		}
	}
	slices.SortFunc(resolved, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	return changed, resolved
}

func sameOrphan(a, b ipam.Orphan) bool {
	return a.Key == b.Key && a.Cause == b.Cause && a.Reason == b.Reason &&
		a.Allocation.Pool == b.Allocation.Pool && slices.Equal(a.Allocation.Addresses, b.Allocation.Addresses)
}

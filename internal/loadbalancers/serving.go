package loadbalancers

import (
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/config"
)

// How a LoadBalancer's addresses are served: its forwarding (decided by
// the allocator, see forwarding.go) and its spec.announce, which come from
// the pool that serves the addresses (ipam.Allocator.ServingPool). An
// orphan whose pool is gone or no longer contains its addresses keeps
// both as they were until it is resolved: a BGP address must not turn
// into an L2 one, withdrawn from the routers and answered for by ARP,
// because a pool was edited (docs/controller-manager.md#orphaned-addresses).

// keptAnnounces are the spec.announce of such orphans, by Service: taken
// from the pool that served them when a reload left them outside it, or
// from their LoadBalancer when the allocator is rebuilt. Guarded by
// Manager.mu.
type keptAnnounces map[types.NamespacedName]*v1alpha1.Announce

// announceLocked is the spec.announce of what key holds. Callers hold mu.
func (m *Manager) announceLocked(key types.NamespacedName) *v1alpha1.Announce {
	if p, ok := m.alloc.ServingPool(key); ok {
		return Announce(p)
	}
	return m.kept[key].DeepCopy()
}

// keepAnnounces notes the announce of every orphan that the pools of prev
// served and the allocator's pools no longer serve, and forgets those
// served again. Callers hold mu, after replacing the allocator's pools.
func (m *Manager) keepAnnounces(prev *config.Config) {
	for key := range m.kept {
		if _, served := m.alloc.ServingPool(key); served {
			delete(m.kept, key)
		}
	}
	for _, o := range m.alloc.Orphans() {
		if _, served := m.alloc.ServingPool(o.Key); served {
			continue
		}
		if _, ok := m.kept[o.Key]; ok {
			continue
		}
		p, _ := prev.Pool(o.Allocation.Pool)
		m.kept[o.Key] = Announce(p)
	}
}

// keepRecordAnnounce keeps lb's spec.announce if its Service's addresses
// are served by no pool. Callers hold mu, after restoring lb.
func (m *Manager) keepRecordAnnounce(lb *v1alpha1.LoadBalancer) {
	key := keyOfLB(lb)
	if _, served := m.alloc.ServingPool(key); !served {
		m.kept[key] = lb.Spec.Announce.DeepCopy()
	}
}

// serving is the part of a LoadBalancer's spec its pool gives.
type serving struct {
	forwarding config.Forwarding
	announce   *v1alpha1.Announce
}

// servingLocked is how what key holds is served. Callers hold mu.
func (m *Manager) servingLocked(key types.NamespacedName) serving {
	terms, _ := m.alloc.Terms(key)
	return serving{forwarding: terms.Served, announce: m.announceLocked(key)}
}

// servingAll is how what each LoadBalancer's Service holds is served.
// Callers hold mu.
func (m *Manager) servingAll() map[types.NamespacedName]serving {
	lbs, err := m.lister.List()
	if err != nil {
		return nil
	}
	out := make(map[types.NamespacedName]serving, len(lbs))
	for _, lb := range lbs {
		out[keyOfLB(lb)] = m.servingLocked(keyOfLB(lb))
	}
	return out
}

// enqueueChanged queues the LoadBalancers that are served otherwise than
// before says: a reload changed what their pool gives them. Callers hold
// mu.
func (m *Manager) enqueueChanged(before map[types.NamespacedName]serving) {
	for key, was := range before {
		now := m.servingLocked(key)
		if now.forwarding != was.forwarding || !equality.Semantic.DeepEqual(now.announce, was.announce) {
			m.queue.Add(key)
		}
	}
}

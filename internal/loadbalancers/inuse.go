package loadbalancers

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
)

// inUseMemory is how long an address stays out of reach after the last
// LoadBalancer that reported it in use is deleted: once no Service has it,
// no agent probes it, so nothing says when the other station lets it go.
// A Service given it later is probed again all the same (the agents probe
// every address no host has held), so forgetting costs a report, not an
// outage.
const inUseMemory = time.Hour

// inUseTracker collects the addresses the agents report in use by a
// station which is no load-balancer host (status.hosts[].inUse), which the
// allocator must not hand out (ipam SetInUse). It is pure: the caller
// passes the time and holds the Manager's mu.
type inUseTracker struct {
	byLB map[types.NamespacedName][]netip.Addr
	// gone are addresses last reported by a LoadBalancer since deleted,
	// with when they are forgotten.
	gone map[netip.Addr]time.Time
}

func newInUseTracker() *inUseTracker {
	return &inUseTracker{byLB: map[types.NamespacedName][]netip.Addr{}, gone: map[netip.Addr]time.Time{}}
}

// reportedInUse returns the addresses of lb that any host reports in use,
// sorted and distinct.
func reportedInUse(lb *v1alpha1.LoadBalancer) []netip.Addr {
	var out []netip.Addr
	for _, h := range lb.Status.Hosts {
		for _, u := range h.InUse {
			if a, err := netip.ParseAddr(u.Address); err == nil && slices.Contains(lb.Spec.Addresses, u.Address) {
				out = append(out, a.Unmap())
			}
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// update records what LoadBalancer key reports now (lb nil: it was
// deleted, and what it reported is remembered for inUseMemory).
func (t *inUseTracker) update(key types.NamespacedName, lb *v1alpha1.LoadBalancer, now time.Time) {
	if lb == nil {
		for _, a := range t.byLB[key] {
			t.gone[a] = now.Add(inUseMemory)
		}
		delete(t.byLB, key)
		return
	}
	if r := reportedInUse(lb); len(r) > 0 {
		t.byLB[key] = r
		for _, a := range r {
			delete(t.gone, a) // reported again: as long as it is
		}
		return
	}
	delete(t.byLB, key)
}

// addrs returns the addresses in use now, sorted, and forgets those
// remembered for longer than inUseMemory.
func (t *inUseTracker) addrs(now time.Time) []netip.Addr {
	maps.DeleteFunc(t.gone, func(_ netip.Addr, until time.Time) bool { return !now.Before(until) })
	set := map[netip.Addr]bool{}
	for _, r := range t.byLB {
		for _, a := range r {
			set[a] = true
		}
	}
	for a := range t.gone {
		set[a] = true
	}
	return slices.SortedFunc(maps.Keys(set), netip.Addr.Compare)
}

// noteInUse records what LoadBalancer key reports in use (lb nil: it was
// deleted) and gives the allocator the new set.
func (m *Manager) noteInUse(ctx context.Context, key types.NamespacedName, lb *v1alpha1.LoadBalancer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	m.inUse.update(key, lb, now)
	m.applyInUse(ctx, now) // which writes only when the set changed
}

// applyInUse gives the allocator the addresses in use now when they
// changed. Callers hold mu.
func (m *Manager) applyInUse(ctx context.Context, now time.Time) {
	addrs := m.inUse.addrs(now)
	if m.alloc == nil || slices.Equal(addrs, m.inUseSet) {
		return
	}
	m.alloc.SetInUse(addrs)
	m.inUseSet = addrs
	m.usageChanged()
	klog.FromContext(ctx).Info("Addresses in use by stations that are no load-balancer hosts are not handed out", "addresses", addrs)
	m.queueMoves()
}

// queueMoves queues the Services that hold an address in use of a pool
// with address-conflict = move: the queue's refresh gives them another
// address (moveInUse). Callers hold mu.
func (m *Manager) queueMoves() {
	for key := range m.inUse.byLB {
		if m.alloc.MovesAway(key) {
			m.queue.Add(key)
		}
	}
}

// ReasonAddressMoved is the Event on a Service given another address
// because its own is in use by another station (address-conflict = move).
const ReasonAddressMoved = "AddressMoved"

// moveInUse gives svc another address of its pool when one it holds is in
// use by a station which is no load-balancer host and its pool moves such
// Services (ipam Allocator.MovesAway); it writes the LoadBalancer and the
// Service's status (the service controller writes it only after Ensure,
// which a status report does not call) and records an Event. It reports
// whether it moved anything. The caller holds svc's key lock.
func (m *Manager) moveInUse(ctx context.Context, svc *v1.Service) (bool, error) {
	key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	m.mu.Lock()
	moves := m.alloc != nil && m.alloc.MovesAway(key)
	m.mu.Unlock()
	if !moves {
		return false, nil
	}
	before, _ := m.held(key)
	a, held, err := m.assign(svc)
	if err != nil || !held || slices.Equal(before.Addresses, a.Addresses) {
		return false, nil // asked for by address, or nowhere to go: kept
	}
	spec, _ := m.desiredSpec(svc, a)
	if err := m.write(ctx, svc, spec); err != nil {
		return false, err
	}
	st := ServiceStatus(&spec)
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"loadBalancer": st}})
	if err != nil {
		return false, err
	}
	if _, err := m.dyn.Resource(servicesGVR).Namespace(svc.Namespace).Patch(ctx, svc.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return false, fmt.Errorf("write the moved addresses to Service %s: %w", klog.KObj(svc), err)
	}
	var gone []netip.Addr
	for _, addr := range before.Addresses {
		if !slices.Contains(a.Addresses, addr) {
			gone = append(gone, addr)
		}
	}
	m.events.Eventf(svc, v1.EventTypeWarning, ReasonAddressMoved,
		"%s is in use by a station that is no load-balancer host and pool %q moves such Services (address-conflict = move): addresses now %s",
		addrList(gone), a.Pool, addrList(a.Addresses))
	klog.FromContext(ctx).Info("Moved a Service off an address in use by another station", "service", klog.KObj(svc), "from", before.Addresses, "to", a.Addresses)
	return true, nil
}

var servicesGVR = schema.GroupVersionResource{Version: "v1", Resource: "services"}

func addrList(addrs []netip.Addr) string {
	s := make([]string, len(addrs))
	for i, a := range addrs {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
}

// forgetInUse lets the addresses remembered from deleted LoadBalancers go
// once inUseMemory has passed, until ctx ends.
func (m *Manager) forgetInUse(ctx context.Context) {
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			m.mu.Lock()
			m.applyInUse(ctx, now)
			m.mu.Unlock()
		}
	}
}

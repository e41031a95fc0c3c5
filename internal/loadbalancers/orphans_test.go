package loadbalancers

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/ipam"
)

var (
	earlier = metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	now     = metav1.NewTime(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
)

func newOrphan(name string, cause ipam.OrphanCause, reason, pool string, addrs ...string) ipam.Orphan {
	o := ipam.Orphan{Key: types.NamespacedName{Namespace: "default", Name: name}, Cause: cause, Reason: reason}
	o.Allocation.Pool = pool
	for _, a := range addrs {
		o.Allocation.Addresses = append(o.Allocation.Addresses, netip.MustParseAddr(a))
	}
	return o
}

var (
	webOrphan   = newOrphan("web", ipam.OrphanAddressNotInPool, `192.0.2.200 is not in pool "default"`, "default", "192.0.2.200")
	webGone     = newOrphan("web", ipam.OrphanPoolNotConfigured, `pool "default" is not configured`, "default", "192.0.2.200")
	apiOrphan   = newOrphan("api", ipam.OrphanNamespaceNotAllowed, `pool "t" does not allow namespace "default"`, "t", "192.0.2.10", "2001:db8::a")
	sharerOfAPI = newOrphan("dns", ipam.OrphanNamespaceNotAllowed, `pool "t" does not allow namespace "default"`, "t", "192.0.2.10")
)

func newLB(name string, conds ...metav1.Condition) *v1alpha1.LoadBalancer {
	return &v1alpha1.LoadBalancer{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("lb-" + name)},
		Status:     v1alpha1.LoadBalancerStatus{Conditions: conds},
	}
}

func ready() metav1.Condition {
	return metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Synced", LastTransitionTime: earlier}
}

func orphanedSince(o ipam.Orphan, t metav1.Time) metav1.Condition {
	return orphanCondition(o, nil, t)
}

func TestOrphanCondition(t *testing.T) {
	c := orphanCondition(webOrphan, nil, now)
	want := metav1.Condition{
		Type: "AddressOrphaned", Status: metav1.ConditionTrue, Reason: "AddressNotInPool", LastTransitionTime: now,
		Message: `192.0.2.200 kept outside the pools: 192.0.2.200 is not in pool "default". The Service keeps serving on it and no other Service gets it. ` +
			`To resolve: add it back to a pool namespace "default" may use, give the Service another address or pool, or delete the Service (docs/controller-manager.md#orphaned-addresses)`,
	}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("condition (-want +got):\n%s", diff)
	}
	if m := orphanCondition(apiOrphan, nil, now).Message; !strings.HasPrefix(m, "192.0.2.10, 2001:db8::a kept outside the pools") {
		t.Errorf("message %q does not name both addresses", m)
	}
	// Still orphaned, for another reason: the transition time stays.
	old := orphanedSince(webOrphan, earlier)
	if got := orphanCondition(webGone, &old, now); got.LastTransitionTime != earlier || got.Reason != "PoolNotConfigured" {
		t.Errorf("condition after a new reason = %+v, want the old transition time and reason PoolNotConfigured", got)
	}
}

func TestPlanOrphanConditions(t *testing.T) {
	webCond := orphanedSince(webOrphan, earlier)
	tests := []struct {
		name        string
		orphans     []ipam.Orphan
		lbs         []*v1alpha1.LoadBalancer
		written     map[types.UID]*metav1.Condition
		want        map[string]*metav1.Condition // by LoadBalancer name; nil: remove the condition
		wantMissing []types.NamespacedName
	}{
		{
			name: "no orphans, no conditions: nothing to write",
			lbs:  []*v1alpha1.LoadBalancer{newLB("web", ready()), newLB("api")},
		},
		{
			name:    "a new orphan gets the condition beside the agents' Ready",
			orphans: []ipam.Orphan{webOrphan},
			lbs:     []*v1alpha1.LoadBalancer{newLB("web", ready()), newLB("api")},
			want:    map[string]*metav1.Condition{"web": ptrTo(orphanCondition(webOrphan, nil, now))},
		},
		{
			name:    "an orphan that says so already: nothing to write",
			orphans: []ipam.Orphan{webOrphan},
			lbs:     []*v1alpha1.LoadBalancer{newLB("web", ready(), webCond)},
		},
		{
			name:    "the reason changed: rewritten, since the same time",
			orphans: []ipam.Orphan{webGone},
			lbs:     []*v1alpha1.LoadBalancer{newLB("web", webCond)},
			want:    map[string]*metav1.Condition{"web": ptrTo(orphanCondition(webGone, &webCond, now))},
		},
		{
			name: "resolved: the condition is removed",
			lbs:  []*v1alpha1.LoadBalancer{newLB("web", ready(), webCond), newLB("api", ready())},
			want: map[string]*metav1.Condition{"web": nil},
		},
		{
			name:    "written since the cache was read: not written again",
			orphans: []ipam.Orphan{webOrphan},
			lbs:     []*v1alpha1.LoadBalancer{newLB("web", ready()), newLB("api", webCond)},
			written: map[types.UID]*metav1.Condition{"lb-web": &webCond, "lb-api": nil},
		},
		{
			name:        "an orphan whose LoadBalancer is not cached yet",
			orphans:     []ipam.Orphan{apiOrphan, sharerOfAPI, webOrphan},
			lbs:         []*v1alpha1.LoadBalancer{newLB("web")},
			want:        map[string]*metav1.Condition{"web": ptrTo(orphanCondition(webOrphan, nil, now))},
			wantMissing: []types.NamespacedName{{Namespace: "default", Name: "api"}, {Namespace: "default", Name: "dns"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			changes, missing := planOrphanConditions(tt.orphans, tt.lbs, tt.written, now)
			got := map[string]*metav1.Condition{}
			for _, c := range changes {
				got[c.lb.Name] = c.condition
			}
			if tt.want == nil {
				tt.want = map[string]*metav1.Condition{}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("changes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantMissing, missing); diff != "" {
				t.Errorf("missing (-want +got):\n%s", diff)
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

func TestOrphanedAddresses(t *testing.T) {
	got := orphanedAddresses([]ipam.Orphan{webOrphan, apiOrphan, sharerOfAPI})
	want := map[string]int{"default": 1, "t": 2} // 192.0.2.10 is shared: counted once
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("orphaned addresses (-want +got):\n%s", diff)
	}
	if got := orphanedAddresses(nil); len(got) != 0 {
		t.Errorf("no orphans counted %v", got)
	}
}

func TestOrphanTransitions(t *testing.T) {
	last := map[types.NamespacedName]ipam.Orphan{webOrphan.Key: webOrphan, apiOrphan.Key: apiOrphan}
	changed, resolved := orphanTransitions(last, []ipam.Orphan{webGone, sharerOfAPI})
	if diff := cmp.Diff([]ipam.Orphan{webGone, sharerOfAPI}, changed, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("changed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]types.NamespacedName{apiOrphan.Key}, resolved); diff != "" {
		t.Errorf("resolved (-want +got):\n%s", diff)
	}
	changed, resolved = orphanTransitions(map[types.NamespacedName]ipam.Orphan{webOrphan.Key: webOrphan}, []ipam.Orphan{webOrphan})
	if len(changed) != 0 || len(resolved) != 0 {
		t.Errorf("unchanged orphans: changed %v, resolved %v", changed, resolved)
	}
}

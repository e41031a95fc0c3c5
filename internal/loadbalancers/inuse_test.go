package loadbalancers

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
)

// TestInUseTracker: the addresses any host reports in use, of the
// LoadBalancer's own addresses only; a report that ends frees the address
// at once (the agents saw the station go); a deleted LoadBalancer's
// reports are remembered for inUseMemory.
func TestInUseTracker(t *testing.T) {
	now := time.Unix(1000, 0)
	web := types.NamespacedName{Namespace: "default", Name: "web"}
	lb := func(reports ...v1alpha1.HostStatus) *v1alpha1.LoadBalancer {
		return &v1alpha1.LoadBalancer{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
			Spec:       v1alpha1.LoadBalancerSpec{Addresses: []string{"192.0.2.10", "2001:db8::a"}},
			Status:     v1alpha1.LoadBalancerStatus{Hosts: reports},
		}
	}
	inUse := func(host string, addrs ...string) v1alpha1.HostStatus {
		h := v1alpha1.HostStatus{Name: host}
		for _, a := range addrs {
			h.InUse = append(h.InUse, v1alpha1.AddressInUse{Address: a, MAC: "02:00:00:00:00:99"})
		}
		return h
	}
	want := func(tr *inUseTracker, at time.Time, addrs ...string) {
		t.Helper()
		var w []netip.Addr
		for _, a := range addrs {
			w = append(w, netip.MustParseAddr(a))
		}
		if got := tr.addrs(at); !slices.Equal(got, w) {
			t.Errorf("in use = %v, want %v", got, w)
		}
	}
	tr := newInUseTracker()
	tr.update(web, lb(v1alpha1.HostStatus{Name: "lb-1"}), now)
	want(tr, now)
	// Two hosts report; one reports an address that is not the
	// LoadBalancer's (ignored).
	tr.update(web, lb(inUse("lb-1", "192.0.2.10"), inUse("lb-2", "2001:db8::a", "192.0.2.99")), now)
	want(tr, now, "192.0.2.10", "2001:db8::a")
	// The IPv6 claim ends.
	tr.update(web, lb(inUse("lb-1", "192.0.2.10")), now)
	want(tr, now, "192.0.2.10")
	// Deleted: remembered, then forgotten.
	tr.update(web, nil, now)
	want(tr, now.Add(inUseMemory-time.Second), "192.0.2.10")
	want(tr, now.Add(inUseMemory))
}

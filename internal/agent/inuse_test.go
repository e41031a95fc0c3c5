package agent

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/membership"
)

// TestStatusOfAnAddressInUse: the owner of an address a foreign station
// answers for writes Ready false and its AddressConflict (status.hosts)
// true, naming the MAC; once the claim stops and it holds the address,
// AddressConflict false; a host that sees no conflict does not write
// Ready true over another's false.
func TestStatusOfAnAddressInUse(t *testing.T) {
	now := metav1.NewTime(time.Unix(1000, 0))
	vip := netip.MustParseAddr("192.0.2.200")
	lb := newLB("web")
	inUse := &membership.Status{State: membership.StateReady, Address: "192.0.2.1:7947",
		InUse: []membership.InUse{{VIP: vip, MAC: "02:00:00:00:00:99", Since: time.Unix(900, 0)}}}
	r := hostReport{Host: "lb-1", Programmed: true, Message: "ok", Member: inUse, ReportsReady: true}
	st, changed := desiredStatus(lb, r, now)
	ready := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
	conflict := meta.FindStatusCondition(st.Hosts[0].Conditions, v1alpha1.ConditionAddressConflict)
	if !changed || ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != ReasonAddressConflict || ready.Message != msgAddressConflict ||
		conflict == nil || conflict.Status != metav1.ConditionTrue || conflict.Reason != ReasonInUse ||
		!strings.Contains(conflict.Message, "192.0.2.200 is in use by MAC 02:00:00:00:00:99") || !strings.Contains(conflict.Message, "not announced") {
		t.Fatalf("status = %+v", st.Conditions)
	}
	// The same in fields, for the controller manager (never to hand the
	// address out again) and for kubectl.
	wantInUse := []v1alpha1.AddressInUse{{Address: "192.0.2.200", MAC: "02:00:00:00:00:99", Since: metav1.NewTime(time.Unix(900, 0))}}
	if !slices.EqualFunc(st.Hosts[0].InUse, wantInUse, sameInUse) {
		t.Errorf("hosts[0].inUse = %+v, want %+v", st.Hosts[0].InUse, wantInUse)
	}
	lb.Status = st
	if _, changed := desiredStatus(lb, r, now); changed {
		t.Errorf("the same report writes again")
	}

	// Another host, which holds nothing of it and sees no conflict, leaves
	// both conditions alone while the address is held by no host.
	calm := &membership.Status{State: membership.StateReady, Address: "192.0.2.2:7947"}
	other, _ := desiredStatus(lb, hostReport{Host: "lb-2", Programmed: true, Message: "ok", Member: calm, ReportsReady: true}, now)
	if len(other.Conditions) != 0 {
		t.Errorf("lb-2 writes %+v over lb-1's conflict", other.Conditions)
	}

	// The station goes away: lb-1 holds the address and clears it.
	clear := &membership.Status{State: membership.StateReady, Address: "192.0.2.1:7947"}
	st, changed = desiredStatus(lb, hostReport{Host: "lb-1", Programmed: true, Message: "ok", Member: clear, Held: []netip.Addr{vip}}, now)
	ready = meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
	conflict = meta.FindStatusCondition(st.Hosts[0].Conditions, v1alpha1.ConditionAddressConflict)
	if !changed || ready == nil || ready.Status != metav1.ConditionTrue || conflict == nil || conflict.Status != metav1.ConditionFalse || conflict.Reason != ReasonNoConflict {
		t.Fatalf("after the claim: %+v", st.Conditions)
	}
	if len(st.Hosts[0].InUse) != 0 {
		t.Errorf("after the claim: hosts[0].inUse = %+v", st.Hosts[0].InUse)
	}
	lb.Status = st
	st, _ = desiredStatus(lb, hostReport{Host: "lb-1", Programmed: true, Message: "ok", Member: clear, Held: []netip.Addr{vip}}, now)
	if c := meta.FindStatusCondition(st.Hosts[0].Conditions, v1alpha1.ConditionAddressConflict); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("a false AddressConflict is dropped instead of kept false: %+v", st.Conditions)
	}

	// A LoadBalancer that never had a conflict gets no such condition.
	fresh, _ := desiredStatus(newLB("api"), hostReport{Host: "lb-1", Programmed: true, Message: "ok", Member: clear, Held: []netip.Addr{vip}}, now)
	if c := meta.FindStatusCondition(fresh.Hosts[0].Conditions, v1alpha1.ConditionAddressConflict); c != nil {
		t.Errorf("condition written without a conflict: %+v", c)
	}

	// Defended: held before the claim; Ready stays true.
	defended := &membership.Status{State: membership.StateReady, InUse: []membership.InUse{{VIP: vip, MAC: "02:00:00:00:00:99", Since: time.Unix(900, 0), Announced: true}}}
	st, _ = desiredStatus(newLB("db"), hostReport{Host: "lb-1", Programmed: true, Message: "ok", Member: defended, Held: []netip.Addr{vip}}, now)
	ready = meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
	conflict = meta.FindStatusCondition(st.Hosts[0].Conditions, v1alpha1.ConditionAddressConflict)
	if ready == nil || ready.Status != metav1.ConditionTrue || conflict == nil || conflict.Reason != ReasonDefended || !strings.Contains(conflict.Message, "holds and defends it") {
		t.Errorf("defended: %+v", st.Conditions)
	}
}

// TestFreshAddresses: only addresses no host is known to have held are
// probed. A status that once named a holder is remembered while the
// address stays a virtual IP (a holder fails while the status is between
// writes: the survivor must not probe), and so is an address this host
// held; an address that stops being a virtual IP is forgotten.
func TestFreshAddresses(t *testing.T) {
	held, fresh, mine := netip.MustParseAddr("192.0.2.200"), netip.MustParseAddr("192.0.2.201"), netip.MustParseAddr("192.0.2.202")
	lb := newLB("web", func(lb *v1alpha1.LoadBalancer) {
		lb.Spec.Addresses = []string{held.String(), fresh.String(), mine.String()}
		lb.Status.Addresses = []v1alpha1.AddressStatus{{Address: held.String(), Host: "lb-2"}, {Address: fresh.String()}, {Address: mine.String()}}
	})
	vips := []netip.Addr{held, fresh, mine}
	var h heldBefore
	got := h.fresh(vips, []*v1alpha1.LoadBalancer{lb}, map[netip.Addr]bool{mine: true})
	if len(got) != 1 || !got[fresh] {
		t.Errorf("fresh = %v, want only %s", got, fresh)
	}
	// The status names no holder any more (between two hosts' writes).
	lb.Status.Addresses = []v1alpha1.AddressStatus{{Address: held.String()}, {Address: fresh.String()}, {Address: mine.String()}}
	if got := h.fresh(vips, []*v1alpha1.LoadBalancer{lb}, nil); len(got) != 1 || !got[fresh] {
		t.Errorf("after the status lost its holders: fresh = %v, want only %s", got, fresh)
	}
	// held leaves the virtual IPs (its Service deleted), then comes back
	// (a new Service got it): probed again.
	h.fresh([]netip.Addr{fresh, mine}, []*v1alpha1.LoadBalancer{lb}, nil)
	if got := h.fresh(vips, []*v1alpha1.LoadBalancer{lb}, nil); len(got) != 2 || !got[held] || !got[fresh] {
		t.Errorf("after %s left and came back: fresh = %v, want %s and %s", held, got, held, fresh)
	}
}

// TestStatusOfALoneHost: a lone agent (--vip-ownership=all) reports an
// address in use as a member does, but writes no Member or Gossip
// condition: it gossips with nobody.
func TestStatusOfALoneHost(t *testing.T) {
	now := metav1.NewTime(time.Unix(1000, 0))
	vip := netip.MustParseAddr("192.0.2.200")
	lone := &membership.Status{State: membership.StateReady, Solo: true,
		Gossip: membership.GossipHealth{Reason: membership.GossipHealthy, Message: "no gossip errors"},
		InUse:  []membership.InUse{{VIP: vip, MAC: "02:00:00:00:00:99", Since: time.Unix(900, 0)}}}
	st, _ := desiredStatus(newLB("web"), hostReport{Host: "lb-1", Programmed: true, Message: "ok", Member: lone, ReportsReady: true}, now)
	for _, typ := range []string{ConditionMember, ConditionGossip} {
		if c := meta.FindStatusCondition(st.Hosts[0].Conditions, typ); c != nil {
			t.Errorf("a lone host writes %s: %+v", typ, c)
		}
	}
	if c := meta.FindStatusCondition(st.Hosts[0].Conditions, v1alpha1.ConditionAddressConflict); c == nil || c.Reason != ReasonInUse {
		t.Errorf("AddressConflict = %+v, want InUse", c)
	}
	if r := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady); r == nil || r.Reason != ReasonAddressConflict {
		t.Errorf("Ready = %+v, want false for AddressConflict", r)
	}
	if len(st.Hosts[0].InUse) != 1 {
		t.Errorf("hosts[0].inUse = %+v", st.Hosts[0].InUse)
	}
}

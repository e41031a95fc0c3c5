package agent

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/membership"
)

func withHost(name string, conds ...metav1.Condition) func(*v1alpha1.LoadBalancer) {
	return func(lb *v1alpha1.LoadBalancer) {
		lb.Status.Hosts = append(lb.Status.Hosts, v1alpha1.HostStatus{Name: name, Conditions: conds})
	}
}

func member(msg string) metav1.Condition {
	return metav1.Condition{Type: ConditionMember, Status: metav1.ConditionTrue, Reason: "Ready", Message: msg}
}

func TestGossipPeers(t *testing.T) {
	lbs := []*v1alpha1.LoadBalancer{
		newLB("a", withHost("lb-1", member("gossip address 192.0.2.1:7947")), withHost("lb-2", member("gossip address 192.0.2.2:7947; interface eth0 is down"))),
		newLB("b", withHost("lb-2", member("gossip address 192.0.2.2:7947")), withHost("lb-3", member("gossip address [2001:db8::3]:7947"))),
		newLB("c", withHost("lb-4", member("something else")), withHost("lb-5", metav1.Condition{Type: v1alpha1.ConditionProgrammed, Message: "gossip address 192.0.2.5:1"})),
	}
	got := gossipPeers(lbs, "lb-1")
	want := []string{"192.0.2.2:7947", "[2001:db8::3]:7947"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("gossipPeers (-want +got):\n%s", diff)
	}
}

func TestMemberCondition(t *testing.T) {
	now := metav1.NewTime(time.Unix(1000, 0))
	later := metav1.NewTime(time.Unix(2000, 0))
	ready := membership.Status{State: membership.StateReady, Address: "192.0.2.1:7947"}
	c := memberCondition(ready, 3, now, nil)
	if c.Status != metav1.ConditionTrue || c.Reason != "Ready" || c.Message != "gossip address 192.0.2.1:7947" {
		t.Errorf("ready: %+v", c)
	}
	// The transition time stays while the status does.
	c2 := memberCondition(membership.Status{State: membership.StateReady, Address: "192.0.2.1:7947"}, 3, later, []metav1.Condition{c})
	if !c2.LastTransitionTime.Equal(&now) {
		t.Errorf("transition time moved: %+v", c2)
	}
	sick := memberCondition(membership.Status{State: membership.StateUnhealthy, Problem: "interface eth0 is down", Address: "192.0.2.1:7947"}, 3, later, []metav1.Condition{c})
	if sick.Status != metav1.ConditionFalse || sick.Reason != "Unhealthy" || !sick.LastTransitionTime.Equal(&later) ||
		sick.Message != "gossip address 192.0.2.1:7947; interface eth0 is down" {
		t.Errorf("unhealthy: %+v", sick)
	}
	// What one agent writes, another reads.
	lb := newLB("x", withHost("lb-1", sick))
	if got := gossipPeers([]*v1alpha1.LoadBalancer{lb}, "lb-2"); !cmp.Equal(got, []string{"192.0.2.1:7947"}) {
		t.Errorf("round trip: %v", got)
	}
}

func TestDesiredStatusWithMember(t *testing.T) {
	now := metav1.NewTime(time.Unix(1000, 0))
	lb := newLB("web")
	vip := netip.MustParseAddr("192.0.2.200")
	m := &membership.Status{State: membership.StateReady, Address: "192.0.2.1:7947"}
	st, changed := desiredStatus(lb, hostReport{Host: "lb-1", Programmed: true, Message: "ok", Held: []netip.Addr{vip}, Member: m}, now)
	if !changed || len(st.Hosts) != 1 || len(st.Hosts[0].Conditions) != 2 || st.Hosts[0].Conditions[1].Type != ConditionMember {
		t.Fatalf("status = %+v", st)
	}
	lb.Status = st
	if _, changed := desiredStatus(lb, hostReport{Host: "lb-1", Programmed: true, Message: "ok", Held: []netip.Addr{vip}, Member: m}, now); changed {
		t.Error("same report is a change")
	}
	m2 := &membership.Status{State: membership.StateHoldDown, Address: "192.0.2.1:7947"}
	if _, changed := desiredStatus(lb, hostReport{Host: "lb-1", Programmed: true, Message: "ok", Member: m2}, now); !changed {
		t.Error("a new member state is no change")
	}
}

func TestValidateOwnership(t *testing.T) {
	o := NewOptions()
	o.Interface = "eth0"
	if err := o.Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	o.Ownership = OwnershipMemberlist
	if err := o.Validate(); err == nil {
		t.Error("memberlist without a key file is valid")
	}
	o.Membership.KeyFile = "/etc/groundcloud/gossip.key"
	if err := o.Validate(); err != nil {
		t.Errorf("memberlist with a key file: %v", err)
	}
	o.Ownership = "leader"
	if err := o.Validate(); err == nil {
		t.Error("unknown --vip-ownership is valid")
	}
}

package agent

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
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
	got := gossipPeers(publishedHosts(lbs, "lb-1"))
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
	if got := gossipPeers(publishedHosts([]*v1alpha1.LoadBalancer{lb}, "lb-2")); !cmp.Equal(got, []string{"192.0.2.1:7947"}) {
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

// TestPublishedHosts: each host's link-layer address travels with its
// gossip address in its Member condition, so that a host can be named
// without gossip; the latest condition wins.
func TestPublishedHosts(t *testing.T) {
	at := func(sec int64, c metav1.Condition) metav1.Condition {
		c.LastTransitionTime = metav1.NewTime(time.Unix(sec, 0))
		return c
	}
	m := membership.Status{State: membership.StateReady, Address: "192.0.2.2:7947", MAC: "02:00:00:00:00:0b"}
	written := memberCondition(m, 1, metav1.NewTime(time.Unix(2000, 0)), nil)
	if written.Message != "gossip address 192.0.2.2:7947, link-layer address 02:00:00:00:00:0b" {
		t.Errorf("message %q", written.Message)
	}
	lbs := []*v1alpha1.LoadBalancer{
		newLB("a", withHost("lb-1", member("gossip address 192.0.2.1:7947, link-layer address 02:00:00:00:00:0a")),
			withHost("lb-2", at(1000, member("gossip address 192.0.2.9:7947")))),
		newLB("b", withHost("lb-2", written),
			withHost("lb-3", member("gossip address [2001:db8::3]:7947, link-layer address 02:00:00:00:00:0C; interface eth0 is down"))),
	}
	want := []membership.Host{
		{Name: "lb-2", Addr: "192.0.2.2:7947", MAC: "02:00:00:00:00:0b"},
		{Name: "lb-3", Addr: "[2001:db8::3]:7947", MAC: "02:00:00:00:00:0c"},
	}
	if diff := cmp.Diff(want, publishedHosts(lbs, "lb-1")); diff != "" {
		t.Errorf("publishedHosts (-want +got):\n%s", diff)
	}
}

// TestGossipCondition: a host that cannot gossip says so in its entry of
// status.hosts, once (the same problem is no change).
func TestGossipCondition(t *testing.T) {
	now := metav1.NewTime(time.Unix(1000, 0))
	lb := newLB("web")
	bad := &membership.Status{State: membership.StateReady, Address: "192.0.2.1:7947",
		Gossip: membership.GossipHealth{Reason: membership.GossipDecryptFailed, Message: "gossip from lb-2 (192.0.2.2) cannot be decrypted"}}
	st, changed := desiredStatus(lb, hostReport{Host: "lb-1", Programmed: true, Message: "ok", Member: bad}, now)
	if !changed {
		t.Fatal("no change")
	}
	c := meta.FindStatusCondition(st.Hosts[0].Conditions, ConditionGossip)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "DecryptFailed" || c.Message != bad.Gossip.Message {
		t.Fatalf("Gossip condition %+v", c)
	}
	lb.Status = st
	if _, changed := desiredStatus(lb, hostReport{Host: "lb-1", Programmed: true, Message: "ok", Member: bad}, now); changed {
		t.Error("the same gossip problem is a change")
	}
	good := *bad
	good.Gossip = membership.GossipHealth{Reason: membership.GossipHealthy, Message: "no gossip errors"}
	st, changed = desiredStatus(lb, hostReport{Host: "lb-1", Programmed: true, Message: "ok", Member: &good}, now)
	if c := meta.FindStatusCondition(st.Hosts[0].Conditions, ConditionGossip); !changed || c.Status != metav1.ConditionTrue {
		t.Errorf("healthy again: changed %v, %+v", changed, c)
	}
}

func TestHostsChanged(t *testing.T) {
	a := &Agent{cfg: Config{Host: "lb-1", Membership: fakeMembership{}}}
	old := newLB("a", withHost("lb-2", member("gossip address 192.0.2.2:7947")))
	same := old.DeepCopy()
	same.Status.Hosts = append(same.Status.Hosts, v1alpha1.HostStatus{Name: "lb-1", Conditions: []metav1.Condition{member("gossip address 192.0.2.1:7947")}})
	if a.hostsChanged(old, same) {
		t.Error("this host's own condition is a change")
	}
	mac := newLB("a", withHost("lb-2", member("gossip address 192.0.2.2:7947, link-layer address 02:00:00:00:00:0b")))
	if !a.hostsChanged(old, mac) {
		t.Error("another host's new link-layer address is no change")
	}
}

type fakeMembership struct{ Membership }

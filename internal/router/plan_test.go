package router

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
)

func newRoute(node, dst, via string) *v1alpha1.Route {
	return &v1alpha1.Route{
		ObjectMeta: metav1.ObjectMeta{Name: node + "/" + dst, Generation: 1},
		Spec:       v1alpha1.RouteSpec{NodeName: node, DestinationCIDR: dst, NextHop: via},
	}
}

func want(node, dst, via string) Want {
	return Want{Dst: netip.MustParsePrefix(dst), Via: netip.MustParseAddr(via), Name: node + "/" + dst}
}

// A dual-stack cluster of three nodes.
var cluster = []*v1alpha1.Route{
	newRoute("node-3", "fd00:10:244:3::/64", "2001:db8::13"),
	newRoute("node-1", "10.244.1.0/24", "192.0.2.11"),
	newRoute("node-1", "fd00:10:244:1::/64", "2001:db8::11"),
	newRoute("node-2", "10.244.2.0/24", "192.0.2.12"),
	newRoute("node-2", "fd00:10:244:2::/64", "2001:db8::12"),
	newRoute("node-3", "10.244.3.0/24", "192.0.2.13"),
}

func TestSelect(t *testing.T) {
	for _, tc := range []struct {
		name      string
		objs      []*v1alpha1.Route
		placement Placement
		self      string
		want      []Want
		problems  []Problem
	}{
		{
			name: "node: every other node's CIDRs, sorted", objs: cluster, placement: PlacementNode, self: "node-1",
			want: []Want{
				want("node-2", "10.244.2.0/24", "192.0.2.12"),
				want("node-3", "10.244.3.0/24", "192.0.2.13"),
				want("node-2", "fd00:10:244:2::/64", "2001:db8::12"),
				want("node-3", "fd00:10:244:3::/64", "2001:db8::13"),
			},
		},
		{
			name: "gateway: every CIDR", objs: cluster, placement: PlacementGateway,
			want: []Want{
				want("node-1", "10.244.1.0/24", "192.0.2.11"),
				want("node-2", "10.244.2.0/24", "192.0.2.12"),
				want("node-3", "10.244.3.0/24", "192.0.2.13"),
				want("node-1", "fd00:10:244:1::/64", "2001:db8::11"),
				want("node-2", "fd00:10:244:2::/64", "2001:db8::12"),
				want("node-3", "fd00:10:244:3::/64", "2001:db8::13"),
			},
		},
		{
			name: "gateway that is also a node", objs: cluster[:3], placement: PlacementGateway, self: "node-1",
			want: []Want{want("node-3", "fd00:10:244:3::/64", "2001:db8::13")},
		},
		{
			name:      "no Routes",
			placement: PlacementNode, self: "node-1",
		},
		{
			name: "a destination twice: neither",
			objs: []*v1alpha1.Route{
				newRoute("node-2", "10.244.2.0/24", "192.0.2.12"),
				newRoute("node-4", "10.244.2.0/24", "192.0.2.14"),
				newRoute("node-3", "10.244.3.0/24", "192.0.2.13"),
			},
			placement: PlacementGateway,
			want:      []Want{want("node-3", "10.244.3.0/24", "192.0.2.13")},
			problems: []Problem{
				{Name: "node-2/10.244.2.0/24", Reason: ReasonDuplicate, Message: "2 Routes have destination 10.244.2.0/24; none is programmed"},
				{Name: "node-4/10.244.2.0/24", Reason: ReasonDuplicate, Message: "2 Routes have destination 10.244.2.0/24; none is programmed"},
			},
		},
		{
			name: "invalid specs",
			objs: []*v1alpha1.Route{
				newRoute("node-2", "10.244.2.0/24", "2001:db8::12"),
				newRoute("node-3", "10.244.3.1/24", "192.0.2.13"),
				newRoute("node-4", "10.244.4.0/24", "nope"),
			},
			placement: PlacementGateway,
			problems: []Problem{
				{Name: "node-2/10.244.2.0/24", Reason: ReasonInvalid, Message: "next hop 2001:db8::12 is not of the family of 10.244.2.0/24"},
				{Name: "node-3/10.244.3.1/24", Reason: ReasonInvalid, Message: `destination "10.244.3.1/24" or next hop "192.0.2.13" does not parse`},
				{Name: "node-4/10.244.4.0/24", Reason: ReasonInvalid, Message: `destination "10.244.4.0/24" or next hop "nope" does not parse`},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, problems := Select(tc.objs, tc.placement, tc.self)
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
				cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
				t.Errorf("wants (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.problems, problems); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func inst(dst, via string, prio int) Installed {
	i := Installed{Dst: netip.MustParsePrefix(dst), Priority: prio}
	if via != "" {
		i.Via = netip.MustParseAddr(via)
	}
	return i
}

func TestDiff(t *testing.T) {
	w2 := want("node-2", "10.244.2.0/24", "192.0.2.12")
	w3 := want("node-3", "10.244.3.0/24", "192.0.2.13")
	w6 := want("node-2", "fd00:10:244:2::/64", "2001:db8::12")
	for _, tc := range []struct {
		name string
		want []Want
		have []Installed
		plan Plan
	}{
		{name: "nothing to do"},
		{name: "fresh host", want: []Want{w2, w3, w6}, plan: Plan{Add: []Want{w2, w3, w6}}},
		{
			name: "after a restart: all there", want: []Want{w2, w3, w6},
			have: []Installed{inst("fd00:10:244:2::/64", "2001:db8::12", 1024), inst("10.244.2.0/24", "192.0.2.12", 0), inst("10.244.3.0/24", "192.0.2.13", 0)},
		},
		{
			name: "stale and missing", want: []Want{w2, w6},
			have: []Installed{inst("10.244.2.0/24", "192.0.2.12", 0), inst("10.244.3.0/24", "192.0.2.13", 0), inst("fd00:10:244:9::/64", "2001:db8::19", 1024)},
			plan: Plan{Add: []Want{w6}, Delete: []Installed{inst("10.244.3.0/24", "192.0.2.13", 0), inst("fd00:10:244:9::/64", "2001:db8::19", 1024)}},
		},
		{
			name: "next hop moved: replace at the installed metric", want: []Want{w2},
			have: []Installed{inst("10.244.2.0/24", "192.0.2.99", 5)},
			plan: Plan{Replace: []Change{{Old: inst("10.244.2.0/24", "192.0.2.99", 5), New: w2}}},
		},
		{
			name: "a destination held twice: keep the right one", want: []Want{w2},
			have: []Installed{inst("10.244.2.0/24", "192.0.2.99", 0), inst("10.244.2.0/24", "192.0.2.12", 100)},
			plan: Plan{Delete: []Installed{inst("10.244.2.0/24", "192.0.2.99", 0)}},
		},
		{
			name: "held twice, neither right: replace one, delete the other", want: []Want{w2},
			have: []Installed{inst("10.244.2.0/24", "192.0.2.98", 0), inst("10.244.2.0/24", "", 100)},
			plan: Plan{
				Replace: []Change{{Old: inst("10.244.2.0/24", "192.0.2.98", 0), New: w2}},
				Delete:  []Installed{inst("10.244.2.0/24", "", 100)},
			},
		},
		{
			name: "nothing wanted: all ours go", have: []Installed{inst("10.244.3.0/24", "192.0.2.13", 0), inst("10.244.2.0/24", "192.0.2.12", 0)},
			plan: Plan{Delete: []Installed{inst("10.244.2.0/24", "192.0.2.12", 0), inst("10.244.3.0/24", "192.0.2.13", 0)}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Diff(tc.want, tc.have)
			if diff := cmp.Diff(tc.plan, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
				cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
				t.Errorf("Diff (-want +got):\n%s", diff)
			}
			if got.Empty() != (len(tc.plan.Add)+len(tc.plan.Replace)+len(tc.plan.Delete) == 0) {
				t.Errorf("Empty = %v", got.Empty())
			}
		})
	}
}

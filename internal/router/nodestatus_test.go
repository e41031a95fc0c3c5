package router

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/groundcloud/groundcloud/internal/backends"
	"github.com/groundcloud/groundcloud/internal/routeapi"
)

func TestPodRoutesCondition(t *testing.T) {
	want := func(i int) Want {
		return Want{Dst: netip.MustParsePrefix("10.244." + string(rune('0'+i)) + ".0/24"), Via: netip.MustParseAddr("192.0.2.1" + string(rune('0'+i))), Name: "node"}
	}
	wants := []Want{want(1), want(2), want(3), want(4), want(5)}
	for _, tc := range []struct {
		name     string
		wants    []Want
		failed   map[netip.Prefix]error
		status   corev1.ConditionStatus
		contains []string
		absent   []string
	}{
		{name: "all programmed", wants: wants, status: corev1.ConditionTrue, contains: []string{"5 routes"}},
		{name: "nothing to hold (the only node)", status: corev1.ConditionTrue, contains: []string{"0 routes"}},
		{name: "one failed", wants: wants, failed: map[netip.Prefix]error{wants[1].Dst: ErrForeignRoute},
			status: corev1.ConditionFalse, contains: []string{"1 of 5", "10.244.2.0/24 via 192.0.2.12", ErrForeignRoute.Error()}},
		{name: "four failed: three named", wants: wants, failed: map[netip.Prefix]error{
			wants[0].Dst: errors.New("a"), wants[1].Dst: errors.New("b"), wants[2].Dst: errors.New("c"), wants[4].Dst: errors.New("e")},
			status: corev1.ConditionFalse, contains: []string{"4 of 5", "10.244.1.0/24", "10.244.3.0/24", "; ..."}, absent: []string{"10.244.5.0/24"}},
		{name: "a failure of a route it does not hold", wants: wants[:2], failed: map[netip.Prefix]error{wants[3].Dst: errors.New("d")},
			status: corev1.ConditionTrue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := podRoutes(tc.wants, tc.failed)
			if c.Type != backends.ConditionPodRoutes || c.Status != tc.status {
				t.Fatalf("condition %s=%s, want %s=%s (%+v)", c.Type, c.Status, backends.ConditionPodRoutes, tc.status, c)
			}
			wantReason := ReasonRoutesProgrammed
			if tc.status != corev1.ConditionTrue {
				wantReason = ReasonRoutesMissing
			}
			if c.Reason != wantReason {
				t.Errorf("reason %q, want %q", c.Reason, wantReason)
			}
			for _, s := range tc.contains {
				if !strings.Contains(c.Message, s) {
					t.Errorf("message %q lacks %q", c.Message, s)
				}
			}
			for _, s := range tc.absent {
				if strings.Contains(c.Message, s) {
					t.Errorf("message %q names %q", c.Message, s)
				}
			}
		})
	}
}

// memTable is a kernel table that applies every plan.
type memTable struct{ have []Installed }

func (m *memTable) List() ([]Installed, error) { return m.have, nil }
func (m *memTable) Apply(p Plan) map[netip.Prefix]error {
	for _, a := range p.Add {
		m.have = append(m.have, Installed{Dst: a.Dst, Via: a.Via})
	}
	return nil
}

// A node joining a large cluster writes its PodRoutes condition before
// the Routes' statuses, a write each: load balancers wait for the
// condition, not for the statuses.
func TestNodeConditionBeforeRouteStatuses(t *testing.T) {
	scheme := runtime.NewScheme()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{routeapi.Resource: "RouteList"})
	r := New(Config{Host: "node-1", Placement: PlacementNode, NodeName: "node-1", Dynamic: dyn, Table: &memTable{}, MinSync: time.Second, MaxSync: time.Minute})
	for _, rt := range cluster {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rt)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.informer.GetStore().Add(&unstructured.Unstructured{Object: u}); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	var writes []string
	for _, a := range dyn.Actions() {
		if a.GetVerb() != "list" && a.GetVerb() != "watch" {
			writes = append(writes, a.GetVerb()+" "+a.GetResource().Resource+"/"+a.GetSubresource())
		}
	}
	// node-1 holds the routes to node-2's and node-3's pods and reports on
	// those four Routes.
	if len(writes) != 5 || writes[0] != "patch nodes/status" {
		t.Fatalf("writes %v, want the Node's status first, then the 4 Routes'", writes)
	}
	for _, w := range writes[1:] {
		if w != "patch routes/status" {
			t.Errorf("write %q after the Node's, want only Route statuses", w)
		}
	}
}

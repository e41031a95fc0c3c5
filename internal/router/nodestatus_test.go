package router

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/groundcloud/groundcloud/internal/backends"
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

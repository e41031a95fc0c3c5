package addresspools

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/config"
	"github.com/groundcloud/groundcloud/internal/ipam"
)

func pool(t *testing.T, name string, ranges ...string) *config.Pool {
	t.Helper()
	p := &config.Pool{Name: name, AutoAssign: true}
	for _, r := range ranges {
		ar, err := config.ParseAddrRange(r)
		if err != nil {
			t.Fatal(err)
		}
		p.Ranges = append(p.Ranges, ar)
	}
	return p
}

func TestDesired(t *testing.T) {
	got := Desired(Snapshot{
		Pools: []*config.Pool{
			pool(t, "dual", "2001:db8::/64", "192.0.2.200-192.0.2.219"),
			pool(t, "empty"),
		},
		Usage: []ipam.PoolUsage{
			{Pool: "dual", Family: v1.IPv6Protocol, Size: math.MaxUint64, Used: 1},
			{Pool: "dual", Family: v1.IPv4Protocol, Size: 20, Used: 3, InUse: 2},
		},
		Orphans: map[string]int{"dual": 2, "gone": 1},
	})
	var summaries []v1alpha1.UsageSummary
	var families [][]v1alpha1.FamilyUsage
	var orphaned []int64
	for _, ap := range got {
		summaries = append(summaries, ap.Status.Summary)
		families = append(families, ap.Status.Families)
		orphaned = append(orphaned, ap.Status.Orphaned)
	}
	wantSummaries := []v1alpha1.UsageSummary{
		{Families: "IPv4,IPv6", Size: "20,~2^64", Used: "3,1", Free: "15,~2^64", Ranges: "2001:db8::/64,192.0.2.200-192.0.2.219"},
		{},
	}
	if diff := cmp.Diff(wantSummaries, summaries); diff != "" {
		t.Errorf("summaries (-want +got):\n%s", diff)
	}
	wantFamilies := [][]v1alpha1.FamilyUsage{
		{{Family: "IPv4", Size: 20, Used: 3, InUse: 2, Free: 15}, {Family: "IPv6", Size: math.MaxInt64, Used: 1, Free: math.MaxInt64}},
		nil,
	}
	if diff := cmp.Diff(wantFamilies, families); diff != "" {
		t.Errorf("families (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int64{2, 0}, orphaned); diff != "" {
		t.Errorf("orphaned (-want +got):\n%s", diff)
	}
}

func TestPlan(t *testing.T) {
	obj := func(name string, used int64, rv string) *v1alpha1.AddressPool {
		ap := &v1alpha1.AddressPool{Spec: v1alpha1.AddressPoolSpec{Ranges: []string{"192.0.2.0/28"}},
			Status: v1alpha1.AddressPoolStatus{Families: []v1alpha1.FamilyUsage{{Family: "IPv4", Size: 16, Used: used, Free: 16 - used}}}}
		ap.Name, ap.ResourceVersion = name, rv
		return ap
	}
	names := func(aps []*v1alpha1.AddressPool) []string {
		var out []string
		for _, ap := range aps {
			out = append(out, ap.Name+"@"+ap.ResourceVersion)
		}
		return out
	}
	for _, tc := range []struct {
		name                   string
		desired                []*v1alpha1.AddressPool
		stored                 map[string]*v1alpha1.AddressPool
		create, update, delete []string
	}{
		{name: "nothing stored", desired: []*v1alpha1.AddressPool{obj("a", 0, "")}, create: []string{"a@"}},
		{name: "unchanged", desired: []*v1alpha1.AddressPool{obj("a", 1, "")}, stored: map[string]*v1alpha1.AddressPool{"a": obj("a", 1, "7")}},
		{name: "usage changed", desired: []*v1alpha1.AddressPool{obj("a", 2, "")}, stored: map[string]*v1alpha1.AddressPool{"a": obj("a", 1, "7")}, update: []string{"a@7"}},
		{name: "pool removed", stored: map[string]*v1alpha1.AddressPool{"a": obj("a", 1, "7"), "b": obj("b", 0, "8")}, delete: []string{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := Plan(tc.desired, tc.stored)
			got := [][]string{names(w.Create), names(w.Update), w.Delete}
			if diff := cmp.Diff([][]string{tc.create, tc.update, tc.delete}, got); diff != "" {
				t.Errorf("create, update, delete (-want +got):\n%s", diff)
			}
			if w.Empty() != (len(tc.create)+len(tc.update)+len(tc.delete) == 0) {
				t.Errorf("Empty = %v", w.Empty())
			}
		})
	}
}

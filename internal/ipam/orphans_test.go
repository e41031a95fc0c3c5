package ipam

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/groundcloud/groundcloud/internal/config"
)

// TestOrphans: after a reload, Orphans lists exactly the allocations the
// new pools would not grant, with their cause, and OrphanOf agrees for
// each Service.
func TestOrphans(t *testing.T) {
	before := []*config.Pool{
		newPool("a", ranges("10.0.0.0/30", "2001:db8::/126")),
		newPool("t", ranges("10.0.1.0/30"), manual(), namespaces("team", "other")),
	}
	services := []*v1.Service{
		newService("web"), // a 10.0.0.0
		newService("dual", withFamilies(require, v4, v6)),        // a 10.0.0.1, 2001:db8::
		newService("x", withSharing("k"), withPorts("TCP/53")),   // a 10.0.0.2
		newService("y", withSharing("k"), withPorts("UDP/53")),   // a 10.0.0.2
		newService("team", inNamespace("team"), withPool("t")),   // t 10.0.1.0
		newService("other", inNamespace("other"), withPool("t")), // t 10.0.1.1
	}
	tests := []struct {
		name  string
		after []*config.Pool
		want  []Orphan
	}{
		{
			name:  "same pools",
			after: before,
		},
		{
			name: "pools grew",
			after: []*config.Pool{
				newPool("a", ranges("10.0.0.0/29", "2001:db8::/64")),
				newPool("t", ranges("10.0.1.0/29"), manual()),
			},
		},
		{
			name: "a pool shrank",
			after: []*config.Pool{
				newPool("a", ranges("10.0.0.1-10.0.0.3", "2001:db8::/126")),
				before[1],
			},
			want: []Orphan{
				{Key: key("web"), Allocation: alloc("a", "10.0.0.0"), Cause: OrphanAddressNotInPool, Reason: `10.0.0.0 is not in pool "a"`},
			},
		},
		{
			name: "a pool lost its IPv6 range",
			after: []*config.Pool{
				newPool("a", ranges("10.0.0.0/30")),
				before[1],
			},
			want: []Orphan{
				{Key: key("dual"), Allocation: alloc("a", "10.0.0.1", "2001:db8::"), Cause: OrphanAddressNotInPool, Reason: `2001:db8:: is not in pool "a"`},
			},
		},
		{
			name: "every sharer of an address",
			after: []*config.Pool{
				newPool("a", ranges("10.0.0.0/31", "10.0.0.3/32", "2001:db8::/126")),
				before[1],
			},
			want: []Orphan{
				{Key: key("x"), Allocation: alloc("a", "10.0.0.2"), Cause: OrphanAddressNotInPool, Reason: `10.0.0.2 is not in pool "a"`},
				{Key: key("y"), Allocation: alloc("a", "10.0.0.2"), Cause: OrphanAddressNotInPool, Reason: `10.0.0.2 is not in pool "a"`},
			},
		},
		{
			name: "a pool dropped a namespace",
			after: []*config.Pool{
				before[0],
				newPool("t", ranges("10.0.1.0/30"), manual(), namespaces("team")),
			},
			want: []Orphan{
				{Key: key("other/other"), Allocation: alloc("t", "10.0.1.1"), Cause: OrphanNamespaceNotAllowed, Reason: `pool "t" does not allow namespace "other"`},
			},
		},
		{
			name:  "a pool was removed",
			after: []*config.Pool{before[0]},
			want: []Orphan{
				{Key: key("other/other"), Allocation: alloc("t", "10.0.1.1"), Cause: OrphanPoolNotConfigured, Reason: `pool "t" is not configured`},
				{Key: key("team/team"), Allocation: alloc("t", "10.0.1.0"), Cause: OrphanPoolNotConfigured, Reason: `pool "t" is not configured`},
			},
		},
		{
			name: "a pool was renamed",
			after: []*config.Pool{
				before[0],
				newPool("teams", ranges("10.0.1.0/30"), manual(), namespaces("team", "other")),
			},
			want: []Orphan{
				{Key: key("other/other"), Allocation: alloc("t", "10.0.1.1"), Cause: OrphanPoolNotConfigured, Reason: `pool "t" is not configured`},
				{Key: key("team/team"), Allocation: alloc("t", "10.0.1.0"), Cause: OrphanPoolNotConfigured, Reason: `pool "t" is not configured`},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := New(before)
			for _, svc := range services {
				mustAssign(t, a, svc)
			}
			a.SetPools(tt.after)
			if diff := cmp.Diff(tt.want, a.Orphans(), addrCmp); diff != "" {
				t.Errorf("Orphans (-want +got):\n%s", diff)
			}
			for _, svc := range services {
				k := key(svc.Namespace + "/" + svc.Name)
				got, ok := a.OrphanOf(k)
				var want *Orphan
				for i := range tt.want {
					if tt.want[i].Key == k {
						want = &tt.want[i]
					}
				}
				if ok != (want != nil) || (ok && !cmp.Equal(*want, got, addrCmp)) {
					t.Errorf("OrphanOf(%s) = %v, %v; want %v", k, got, ok, want)
				}
			}
		})
	}
}

// TestOrphanResolved: an orphan stops being one when its Service is
// released, when a pool takes its addresses back, or when its Service asks
// for something the orphan does not satisfy and moves into a pool.
func TestOrphanResolved(t *testing.T) {
	full := []*config.Pool{newPool("a", ranges("10.0.0.0/30"))}
	shrunk := []*config.Pool{newPool("a", ranges("10.0.0.2-10.0.0.3"))}
	steps := []struct {
		name string
		do   func(*Allocator)
		want []string // orphaned Services after the step
	}{
		{"pool shrinks", func(a *Allocator) { a.SetPools(shrunk) }, []string{"default/web", "default/x"}},
		{"re-assigned unchanged: kept as it is", func(a *Allocator) { mustAssign(t, a, newService("web")) }, []string{"default/web", "default/x"}},
		{"released", func(a *Allocator) { a.Release(key("x")) }, []string{"default/web"}},
		{"asks for an address in the pool", func(a *Allocator) { mustAssign(t, a, newService("web", withIPs("10.0.0.3"))) }, nil},
		{"pool shrinks again", func(a *Allocator) { a.SetPools([]*config.Pool{newPool("a", ranges("10.0.0.2/32"))}) }, []string{"default/web"}},
		{"range is back", func(a *Allocator) { a.SetPools(full) }, nil},
	}
	a := New(full)
	mustAssign(t, a, newService("web")) // 10.0.0.0
	mustAssign(t, a, newService("x"))   // 10.0.0.1
	for _, s := range steps {
		s.do(a)
		var got []string
		for _, o := range a.Orphans() {
			got = append(got, o.Key.String())
		}
		if diff := cmp.Diff(s.want, got); diff != "" {
			t.Errorf("after %q, orphans (-want +got):\n%s", s.name, diff)
		}
		if _, ok := a.OrphanOf(key("nobody")); ok {
			t.Errorf("after %q, OrphanOf a Service that holds nothing reports an orphan", s.name)
		}
	}
}

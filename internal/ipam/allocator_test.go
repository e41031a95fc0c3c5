package ipam

import (
	"errors"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/groundcloud/groundcloud/internal/config"
)

// TestAssignChange assigns a Service, then assigns it again with a changed
// request: the addresses are kept when they still satisfy it, moved when
// not, and on error everything stays as it was.
func TestAssignChange(t *testing.T) {
	pools := []*config.Pool{
		newPool("a", ranges("10.0.0.0/29", "2001:db8::/64")),
		newPool("b", ranges("10.0.1.0/31")),
		newPool("m", ranges("10.0.2.0/30"), manual()),
	}
	tests := []struct {
		name    string
		before  []*v1.Service
		from    *v1.Service // assigned first, as "web"
		between func(a *Allocator)
		to      *v1.Service
		want    Allocation
		wantErr error
	}{
		{
			name: "same request: same addresses",
			from: newService("web", withPorts("TCP/80")),
			to:   newService("web", withPorts("TCP/80")),
			want: alloc("a", "10.0.0.0"),
		},
		{
			name:    "kept even when a lower address is freed",
			before:  []*v1.Service{newService("x")},
			from:    newService("web"),
			between: func(a *Allocator) { a.Release(key("x")) },
			to:      newService("web", withPorts("TCP/443")),
			want:    alloc("a", "10.0.0.1"),
		},
		{
			name:    "kept in a pool that is no longer first",
			before:  []*v1.Service{newService("x"), newService("y"), newService("z"), newService("w"), newService("v"), newService("u"), newService("s"), newService("r")},
			from:    newService("web"),
			between: func(a *Allocator) { a.Release(key("x")) },
			to:      newService("web"),
			want:    alloc("b", "10.0.1.0"),
		},
		{
			name: "kept in a manual pool when the pool annotation is removed",
			from: newService("web", withPool("m")),
			to:   newService("web"),
			want: alloc("m", "10.0.2.0"),
		},
		{
			name: "kept when the requested address annotation is removed",
			from: newService("web", withIPs("10.0.0.5")),
			to:   newService("web"),
			want: alloc("a", "10.0.0.5"),
		},
		{
			name: "kept when the requested address is the held one",
			from: newService("web"),
			to:   newService("web", withIPs("10.0.0.0")),
			want: alloc("a", "10.0.0.0"),
		},
		{
			name: "moves to a new requested address",
			from: newService("web"),
			to:   newService("web", withIPs("10.0.0.6")),
			want: alloc("a", "10.0.0.6"),
		},
		{
			name:    "requested address taken: error, old kept",
			before:  []*v1.Service{newService("x", withIPs("10.0.0.6"))},
			from:    newService("web"),
			to:      newService("web", withIPs("10.0.0.6")),
			wantErr: ErrAddressInUse,
		},
		{
			name: "moves to a named pool",
			from: newService("web"),
			to:   newService("web", withPool("b")),
			want: alloc("b", "10.0.1.0"),
		},
		{
			name:    "named pool exhausted: error, old kept",
			before:  []*v1.Service{newService("x", withPool("b")), newService("y", withPool("b"))},
			from:    newService("web"),
			to:      newService("web", withPool("b")),
			wantErr: ErrPoolExhausted,
		},
		{
			name:    "named pool unknown: error, old kept",
			from:    newService("web"),
			to:      newService("web", withPool("zzz")),
			wantErr: ErrUnknownPool,
		},
		{
			name:   "ports now overlap a sharer's on a requested address: error, old kept",
			before: []*v1.Service{newService("x", withIPs("10.0.0.3"), withSharing("k"), withPorts("TCP/53"))},
			from:   newService("web", withIPs("10.0.0.3"), withSharing("k"), withPorts("UDP/53")),
			to:     newService("web", withIPs("10.0.0.3"), withSharing("k"), withPorts("UDP/53", "TCP/53")),
			// The old allocation is checked by the test: 10.0.0.3.
			wantErr: ErrSharingConflict,
		},
		{
			name:   "ports now overlap a sharer's on an auto address: moves",
			before: []*v1.Service{newService("x", withIPs("10.0.0.3"), withSharing("k"), withPorts("TCP/53"))},
			from:   newService("web", withSharing("k"), withPorts("UDP/53")),
			to:     newService("web", withSharing("k"), withPorts("UDP/53", "TCP/53")),
			want:   alloc("a", "10.0.0.0"),
		},
		{
			name:   "another sharing key: leaves the shared address",
			before: []*v1.Service{newService("x", withIPs("10.0.0.3"), withSharing("k"), withPorts("TCP/53"))},
			from:   newService("web", withSharing("k"), withPorts("UDP/53")),
			to:     newService("web", withSharing("k2"), withPorts("UDP/53")),
			want:   alloc("a", "10.0.0.0"),
		},
		{
			name:   "sharing key removed on a requested shared address: error, old kept",
			before: []*v1.Service{newService("x", withIPs("10.0.0.3"), withSharing("k"), withPorts("TCP/53"))},
			from:   newService("web", withIPs("10.0.0.3"), withSharing("k"), withPorts("UDP/53")),
			to:     newService("web", withIPs("10.0.0.3"), withPorts("UDP/53")),
			// 10.0.0.3 stays web's.
			wantErr: ErrAddressInUse,
		},
		{
			name: "sole holder changes its sharing key: kept",
			from: newService("web", withSharing("k")),
			to:   newService("web", withSharing("k2")),
			want: alloc("a", "10.0.0.0"),
		},
		{
			name: "single to dual-stack: keeps IPv4, adds IPv6",
			from: newService("web"),
			to:   newService("web", withFamilies(require, v6, v4)),
			want: alloc("a", "2001:db8::", "10.0.0.0"),
		},
		{
			name: "dual to single-stack: drops the other family",
			from: newService("web", withFamilies(require, v4, v6)),
			to:   newService("web", withFamilies(single, v6)),
			want: alloc("a", "2001:db8::"),
		},
		{
			name: "prefer dual-stack does not leave an IPv4 pool to gain IPv6",
			from: newService("web", withPool("b")),
			to:   newService("web", withFamilies(prefer, v4, v6)),
			want: alloc("b", "10.0.1.0"),
		},
		{
			name: "require dual-stack leaves an IPv4 pool",
			from: newService("web", withPool("b")),
			to:   newService("web", withFamilies(require, v4, v6)),
			want: alloc("a", "10.0.0.0", "2001:db8::"),
		},
		{
			name:    "require dual-stack in a named IPv4 pool: error, old kept",
			from:    newService("web", withPool("b")),
			to:      newService("web", withPool("b"), withFamilies(require, v4, v6)),
			wantErr: ErrFamilyUnavailable,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := New(pools)
			for _, svc := range tt.before {
				mustAssign(t, a, svc)
			}
			old := mustAssign(t, a, tt.from)
			if tt.between != nil {
				tt.between(a)
			}
			usage := a.Usage()
			got, err := a.Assign(mustRequest(t, tt.to))
			if tt.wantErr != nil {
				checkErr(t, err, tt.wantErr)
				now, _ := a.Lookup(key("web"))
				if diff := cmp.Diff(old, now, addrCmp); diff != "" {
					t.Errorf("failed Assign changed the allocation (-old +now):\n%s", diff)
				}
				if diff := cmp.Diff(usage, a.Usage()); diff != "" {
					t.Errorf("failed Assign changed usage (-old +now):\n%s", diff)
				}
				// The old terms still hold: assigning the old request again
				// changes nothing.
				again := mustAssign(t, a, tt.from)
				if diff := cmp.Diff(old, again, addrCmp); diff != "" {
					t.Errorf("old request after a failed change (-old +now):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, addrCmp); diff != "" {
				t.Errorf("allocation (-want +got):\n%s", diff)
			}
			again := mustAssign(t, a, tt.to)
			if diff := cmp.Diff(got, again, addrCmp); diff != "" {
				t.Errorf("Assign is not idempotent (-first +second):\n%s", diff)
			}
		})
	}
}

func TestRelease(t *testing.T) {
	a := New([]*config.Pool{newPool("a", ranges("10.0.0.0/31"))})
	mustAssign(t, a, newService("x", withSharing("k"), withPorts("TCP/53")))
	mustAssign(t, a, newService("y", withSharing("k"), withPorts("UDP/53")))
	mustAssign(t, a, newService("z"))

	a.Release(key("x"))
	if _, ok := a.Lookup(key("x")); ok {
		t.Errorf("x still has an allocation")
	}
	if got, _ := a.Lookup(key("y")); !cmp.Equal(got, alloc("a", "10.0.0.0"), addrCmp) {
		t.Errorf("y lost its address when x was released: %v", got)
	}
	// x's port is free again on the shared address; the address is not.
	if got := mustAssign(t, a, newService("x2", withIPs("10.0.0.0"), withSharing("k"), withPorts("TCP/53"))); !cmp.Equal(got, alloc("a", "10.0.0.0"), addrCmp) {
		t.Errorf("x2 = %v", got)
	}
	_, err := a.Assign(mustRequest(t, newService("w")))
	checkErr(t, err, ErrPoolExhausted)

	a.Release(key("y"))
	a.Release(key("x2"))
	a.Release(key("nobody"))
	if got := mustAssign(t, a, newService("w")); !cmp.Equal(got, alloc("a", "10.0.0.0"), addrCmp) {
		t.Errorf("w = %v, want the address freed by its last sharer", got)
	}
	a.Release(key("w"))
	a.Release(key("z"))
	checkEmpty(t, a)
}

func checkEmpty(t *testing.T, a *Allocator) {
	t.Helper()
	for _, u := range a.Usage() {
		if u.Used != 0 {
			t.Errorf("usage after releasing everything: %+v", u)
		}
	}
	if len(a.records) != 0 || len(a.held) != 0 || len(a.used[fam4]) != 0 || len(a.used[fam6]) != 0 || len(a.shared) != 0 {
		t.Errorf("state left after releasing everything: %d records, %d held, %d+%d used, %d sharing keys",
			len(a.records), len(a.held), len(a.used[fam4]), len(a.used[fam6]), len(a.shared))
	}
}

func TestSetPoolsKeepsOrphans(t *testing.T) {
	a := New([]*config.Pool{
		newPool("a", ranges("10.0.0.0/30")),
		newPool("gone", ranges("10.0.5.0/30"), manual()),
		newPool("t", ranges("10.0.6.0/30"), manual()),
	})
	mustAssign(t, a, newService("web"))                      // 10.0.0.0
	mustAssign(t, a, newService("api"))                      // 10.0.0.1
	mustAssign(t, a, newService("old", withPool("gone")))    // 10.0.5.0
	mustAssign(t, a, newService("team", withPool("t")))      // 10.0.6.0
	mustAssign(t, a, newService("shared", withSharing("k"))) // 10.0.0.2

	a.SetPools([]*config.Pool{
		newPool("a", ranges("10.0.0.1-10.0.0.3")),
		newPool("b", ranges("10.0.0.0/32", "10.0.5.0/30")),
		newPool("t", ranges("10.0.6.0/30"), manual(), namespaces("team")),
	})
	wantOrphans := []Orphan{
		{Key: key("old"), Allocation: alloc("gone", "10.0.5.0"), Cause: OrphanPoolNotConfigured, Reason: `pool "gone" is not configured`},
		{Key: key("team"), Allocation: alloc("t", "10.0.6.0"), Cause: OrphanNamespaceNotAllowed, Reason: `pool "t" does not allow namespace "default"`},
		{Key: key("web"), Allocation: alloc("a", "10.0.0.0"), Cause: OrphanAddressNotInPool, Reason: `10.0.0.0 is not in pool "a"`},
	}
	if diff := cmp.Diff(wantOrphans, a.Orphans(), addrCmp); diff != "" {
		t.Errorf("orphans (-want +got):\n%s", diff)
	}
	// Orphans count as used where they lie.
	wantUsage := []PoolUsage{
		{Pool: "a", Family: v4, Size: 3, Used: 2},
		{Pool: "b", Family: v4, Size: 5, Used: 2},
		{Pool: "t", Family: v4, Size: 4, Used: 1},
	}
	if diff := cmp.Diff(wantUsage, a.Usage()); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	// Nobody else gets an orphan's address.
	_, err := a.Assign(mustRequest(t, newService("x", withIPs("10.0.0.0"))))
	checkErr(t, err, ErrAddressInUse, "10.0.0.0 is held by default/web")
	if got := mustAssign(t, a, newService("y", withPool("b"))); !cmp.Equal(got, alloc("b", "10.0.5.1"), addrCmp) {
		t.Errorf("y = %v, want the first address of b no orphan holds", got)
	}
	// The same request keeps an orphan (a config edit never moves traffic),
	// also after a restart, when every Service is assigned again.
	for _, name := range []string{"web", "old", "team"} {
		want, _ := a.Lookup(key(name))
		svc := newService(name)
		if name == "old" {
			svc = newService(name, withPool("gone"))
		}
		if name == "team" {
			svc = newService(name, withPool("t"))
		}
		if got := mustAssign(t, a, svc); !cmp.Equal(got, want, addrCmp) {
			t.Errorf("%s: Assign moved an orphan with an unchanged request: %v, want %v", name, got, want)
		}
	}
	// A changed request moves it.
	if got := mustAssign(t, a, newService("web", withPool("b"))); !cmp.Equal(got, alloc("b", "10.0.0.0"), addrCmp) {
		t.Errorf("web = %v, want its address, now in pool b", got)
	}
	if got := mustAssign(t, a, newService("old", withPool("a"))); !cmp.Equal(got, alloc("a", "10.0.0.3"), addrCmp) {
		t.Errorf("old = %v", got)
	}
	_, err = a.Assign(mustRequest(t, newService("team", withIPs("10.0.6.1"))))
	checkErr(t, err, ErrNamespaceNotAllowed)
	if len(a.Orphans()) != 1 {
		t.Errorf("orphans: %v, want team only", a.Orphans())
	}
	// Released normally.
	a.Release(key("team"))
	if len(a.Orphans()) != 0 {
		t.Errorf("orphans after release: %v", a.Orphans())
	}
	for _, name := range []string{"web", "api", "old", "shared", "y"} {
		a.Release(key(name))
	}
	checkEmpty(t, a)
}

// TestSetPoolsAdoption checks that an orphan whose addresses now lie in
// another pool the request may use is adopted by it, without moving.
func TestSetPoolsAdoption(t *testing.T) {
	a := New([]*config.Pool{newPool("public", ranges("10.0.0.0/30", "2001:db8::/64"))})
	mustAssign(t, a, newService("web", withFamilies(require, v4, v6)))
	mustAssign(t, a, newService("api", withIPs("10.0.0.3")))
	mustAssign(t, a, newService("named", withPool("public")))

	// The pool is renamed and no longer auto-assign; its IPv6 range moves to
	// a pool of its own.
	a.SetPools([]*config.Pool{
		newPool("other", ranges("10.0.9.0/30")),
		newPool("v6", ranges("2001:db8::/64"), manual()),
		newPool("edge", ranges("10.0.0.0/30"), manual()),
	})
	if got := len(a.Orphans()); got != 3 {
		t.Fatalf("%d orphans, want 3", got)
	}
	// Requested and auto-assigned addresses are adopted where they now lie.
	if got := mustAssign(t, a, newService("api", withIPs("10.0.0.3"))); !cmp.Equal(got, alloc("edge", "10.0.0.3"), addrCmp) {
		t.Errorf("api = %v", got)
	}
	// Addresses now in two pools cannot be adopted: kept whole.
	if got := mustAssign(t, a, newService("web", withFamilies(require, v4, v6))); !cmp.Equal(got, alloc("public", "10.0.0.0", "2001:db8::"), addrCmp) {
		t.Errorf("web = %v", got)
	}
	// Once single-stack, the IPv4 address is adopted.
	if got := mustAssign(t, a, newService("web", withFamilies(single, v4))); !cmp.Equal(got, alloc("edge", "10.0.0.0"), addrCmp) {
		t.Errorf("web, now single-stack = %v", got)
	}
	// A Service naming the old pool stays an orphan.
	if got := mustAssign(t, a, newService("named", withPool("public"))); !cmp.Equal(got, alloc("public", "10.0.0.1"), addrCmp) {
		t.Errorf("named = %v", got)
	}
	want := []Orphan{{Key: key("named"), Allocation: alloc("public", "10.0.0.1"), Cause: OrphanPoolNotConfigured, Reason: `pool "public" is not configured`}}
	if diff := cmp.Diff(want, a.Orphans(), addrCmp); diff != "" {
		t.Errorf("orphans (-want +got):\n%s", diff)
	}
}

func TestRestore(t *testing.T) {
	pools := []*config.Pool{newPool("a", ranges("10.0.0.0/30", "2001:db8::/64"))}
	a := New(pools)
	ports := func(ps ...string) []Port { return mustRequest(t, newService("p", withPorts(ps...))).Ports }
	steps := []struct {
		key        string
		alloc      Allocation
		sharingKey string
		ports      []Port
		wantErr    error
	}{
		{key: "web", alloc: alloc("a", "10.0.0.1", "2001:db8::1"), ports: ports("TCP/80")},
		{key: "dns-tcp", alloc: alloc("a", "10.0.0.2"), sharingKey: "dns", ports: ports("TCP/53")},
		{key: "dns-udp", alloc: alloc("a", "10.0.0.2"), sharingKey: "dns", ports: ports("UDP/53")},
		{key: "elsewhere", alloc: alloc("gone", "192.0.2.1"), ports: ports("TCP/80")},
		{key: "dup", alloc: alloc("a", "10.0.0.1"), ports: ports("TCP/81"), wantErr: ErrAddressInUse},
		{key: "dup", alloc: alloc("a", "10.0.0.3", "2001:db8::1"), ports: ports("TCP/81"), wantErr: ErrAddressInUse},
		{key: "dup", alloc: alloc("a", "10.0.0.2"), sharingKey: "other", ports: ports("TCP/81"), wantErr: ErrAddressInUse},
		{key: "dup", alloc: alloc("a", "10.0.0.2"), sharingKey: "dns", ports: ports("UDP/53"), wantErr: ErrSharingConflict},
		{key: "dup", alloc: alloc("a"), wantErr: ErrInvalidRequest},
		{key: "dup", alloc: alloc("a", "10.0.0.3", "10.0.0.0"), wantErr: ErrInvalidRequest},
		{key: "dup", alloc: Allocation{Pool: "a", Addresses: addrs("10.0.0.3")[:1:1]}, sharingKey: "dns", ports: ports("TCP/53")},
		// Restoring a Service again replaces its record.
		{key: "dup", alloc: alloc("a", "10.0.0.0"), ports: ports("TCP/53")},
	}
	for i, s := range steps {
		err := a.Restore(key(s.key), s.alloc, Terms{SharingKey: s.sharingKey, Ports: s.ports})
		if s.wantErr != nil {
			if !errors.Is(err, s.wantErr) {
				t.Fatalf("step %d: Restore(%s) error = %v, want %v", i, s.key, err, s.wantErr)
			}
			if got, ok := a.Lookup(key(s.key)); ok {
				t.Fatalf("step %d: refused record was recorded: %v", i, got)
			}
			continue
		}
		if err != nil {
			t.Fatalf("step %d: Restore(%s): %v", i, s.key, err)
		}
	}
	wantUsage := []PoolUsage{
		{Pool: "a", Family: v4, Size: 4, Used: 3},
		{Pool: "a", Family: v6, Size: math.MaxUint64, Used: 1}, // 2^64 saturates
	}
	if diff := cmp.Diff(wantUsage, a.Usage()); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	if o := a.Orphans(); len(o) != 1 || o[0].Key != key("elsewhere") {
		t.Errorf("orphans = %v, want elsewhere", o)
	}
	// After the restore, Assign keeps what was restored and hands out
	// nothing twice.
	if got := mustAssign(t, a, newService("web", withFamilies(require, v4, v6), withPorts("TCP/80"))); !cmp.Equal(got, alloc("a", "10.0.0.1", "2001:db8::1"), addrCmp) {
		t.Errorf("web = %v", got)
	}
	if got := mustAssign(t, a, newService("new")); !cmp.Equal(got, alloc("a", "10.0.0.3"), addrCmp) {
		t.Errorf("new = %v, want the one address no record holds", got)
	}
	_, err := a.Assign(mustRequest(t, newService("newer")))
	checkErr(t, err, ErrPoolExhausted)
	if got := mustAssign(t, a, newService("dns-sctp", withSharing("dns"), withPorts("SCTP/53"))); !cmp.Equal(got, alloc("a", "10.0.0.2"), addrCmp) {
		t.Errorf("dns-sctp = %v", got)
	}
}

func TestLookupReturnsACopy(t *testing.T) {
	a := New([]*config.Pool{newPool("a", ranges("10.0.0.0/30"))})
	got := mustAssign(t, a, newService("web"))
	got.Addresses[0] = addrs("10.9.9.9")[0]
	l, _ := a.Lookup(key("web"))
	l.Addresses[0] = addrs("10.9.9.9")[0]
	if now, _ := a.Lookup(key("web")); !cmp.Equal(now, alloc("a", "10.0.0.0"), addrCmp) {
		t.Errorf("allocation changed through a returned slice: %v", now)
	}
}

func TestNewToleratesBrokenPools(t *testing.T) {
	a := New([]*config.Pool{
		nil,
		{Name: "broken", AutoAssign: true, Ranges: []config.AddrRange{{}, {First: addrs("10.0.0.5")[0], Last: addrs("10.0.0.1")[0]}}},
		newPool("a", ranges("10.0.0.0/30")),
		newPool("a", ranges("10.0.9.0/30")),
	})
	if got := mustAssign(t, a, newService("web")); !cmp.Equal(got, alloc("a", "10.0.0.0"), addrCmp) {
		t.Errorf("web = %v", got)
	}
}

// TestCrossNamespaceSharersKeepTheirAddress: Services of two namespaces
// that share an address under one key — restored from records written
// before keys were scoped to a namespace, or assigned while the pool
// allowed it — keep it in a pool that does not allow it; no other Service
// of another namespace joins them, and nothing is handed out twice.
func TestCrossNamespaceSharersKeepTheirAddress(t *testing.T) {
	scoped := []*config.Pool{newPool("a", ranges("10.0.0.0/30"))}
	open := []*config.Pool{newPool("a", ranges("10.0.0.0/30"), crossNamespace())}
	x := newService("x", inNamespace("n1"), withSharing("k"), withPorts("TCP/53"))
	y := newService("y", inNamespace("n2"), withSharing("k"), withPorts("UDP/53"))
	shared := alloc("a", "10.0.0.2")

	restored := New(scoped)
	for _, svc := range []*v1.Service{x, y} {
		req := mustRequest(t, svc)
		if err := restored.Restore(req.Key, shared, Terms{SharingKey: req.SharingKey, Ports: req.Ports}); err != nil {
			t.Fatalf("Restore(%s): %v", req.Key, err)
		}
	}
	reloaded := New(open)
	mustAssign(t, reloaded, newService("x", inNamespace("n1"), withIPs("10.0.0.2"), withSharing("k"), withPorts("TCP/53")))
	mustAssign(t, reloaded, newService("y", inNamespace("n2"), withIPs("10.0.0.2"), withSharing("k"), withPorts("UDP/53")))
	reloaded.SetPools(scoped)

	for name, a := range map[string]*Allocator{"restored": restored, "pool setting turned off": reloaded} {
		t.Run(name, func(t *testing.T) {
			// Assigned again, as at every start: each keeps the address.
			for _, svc := range []*v1.Service{x, y} {
				if got := mustAssign(t, a, svc); !cmp.Equal(got, shared, addrCmp) {
					t.Errorf("%s = %v, want it kept: %v", svc.Name, got, shared)
				}
			}
			if o := a.Orphans(); len(o) != 0 {
				t.Errorf("orphans = %v, want none", o)
			}
			// Another namespace's Service with the key joins neither
			// automatically nor on request.
			if got := mustAssign(t, a, newService("z", inNamespace("n3"), withSharing("k"), withPorts("TCP/80"))); !cmp.Equal(got, alloc("a", "10.0.0.0"), addrCmp) {
				t.Errorf("z = %v, want a free address", got)
			}
			_, err := a.Assign(mustRequest(t, newService("w", inNamespace("n1"), withIPs("10.0.0.2"), withSharing("k"), withPorts("TCP/81"))))
			checkErr(t, err, ErrAddressInUse, "held by a Service of another namespace")
			// Once the other namespace has left, n1 shares as before.
			a.Release(key("n2/y"))
			if got := mustAssign(t, a, newService("w", inNamespace("n1"), withIPs("10.0.0.2"), withSharing("k"), withPorts("TCP/81"))); !cmp.Equal(got, shared, addrCmp) {
				t.Errorf("w = %v, want %v", got, shared)
			}
		})
	}
}

// TestInUse: an address another station claims on the link is never
// handed out; a Service that holds it keeps it, one that asks for it gets
// it; released, it stays out of reach until no longer in use. Usage counts
// it apart from the used and the free.
func TestInUse(t *testing.T) {
	a := New([]*config.Pool{newPool("a", ranges("10.0.0.10-10.0.0.13"))})
	a.SetInUse(addrs("10.0.0.10"))
	if got := mustAssign(t, a, newService("x")); !cmp.Equal(got, alloc("a", "10.0.0.11"), addrCmp) {
		t.Errorf("x = %v, want the lowest address not in use", got)
	}
	a.SetInUse(addrs("10.0.0.10", "10.0.0.11"))
	if got := mustAssign(t, a, newService("x")); !cmp.Equal(got, alloc("a", "10.0.0.11"), addrCmp) {
		t.Errorf("x = %v, want to keep its address once it is in use", got)
	}
	if got := a.Usage(); len(got) != 1 || got[0].Used != 1 || got[0].InUse != 1 {
		t.Errorf("usage = %+v, want 1 used and 1 in use", got)
	}
	a.Release(key("x"))
	if got := mustAssign(t, a, newService("y")); !cmp.Equal(got, alloc("a", "10.0.0.12"), addrCmp) {
		t.Errorf("y = %v, want neither address in use", got)
	}
	if got := mustAssign(t, a, newService("z", withIPs("10.0.0.10"))); !cmp.Equal(got, alloc("a", "10.0.0.10"), addrCmp) {
		t.Errorf("z asked for 10.0.0.10: %v", got)
	}
	if got := a.Usage(); len(got) != 1 || got[0].Used != 2 || got[0].InUse != 1 {
		t.Errorf("usage = %+v, want 2 used and 1 in use", got)
	}
	a.Release(key("z"))
	a.SetInUse(nil)
	if got := mustAssign(t, a, newService("w")); !cmp.Equal(got, alloc("a", "10.0.0.10"), addrCmp) {
		t.Errorf("w = %v, want the address no longer in use", got)
	}
	if got := a.Usage(); len(got) != 1 || got[0].Used != 2 || got[0].InUse != 0 {
		t.Errorf("usage = %+v, want 2 used", got)
	}
}

// TestInUseMoves: in a pool with address-conflict = move, a Service whose
// address turns out to be in use is given the lowest free one on its next
// Assign (MovesAway says so beforehand); one that asked for the address
// keeps it; with no free address left it keeps its own. In a keep pool
// nothing moves.
func TestInUseMoves(t *testing.T) {
	move := func(p *config.Pool) { p.AddressConflict = config.AddressConflictMove }
	a := New([]*config.Pool{
		newPool("m", ranges("10.0.0.10-10.0.0.12"), move),
		newPool("k", ranges("10.0.1.10-10.0.1.12")),
	})
	x := newService("x", withPool("m"))
	asked := newService("asked", withPool("m"), withIPs("10.0.0.11"))
	kept := newService("kept", withPool("k"))
	mustAssign(t, a, x)
	mustAssign(t, a, asked)
	mustAssign(t, a, kept)
	a.SetInUse(addrs("10.0.0.10", "10.0.0.11", "10.0.1.10"))
	for name, want := range map[string]bool{"x": true, "asked": true, "kept": false} {
		if got := a.MovesAway(key(name)); got != want {
			t.Errorf("MovesAway(%s) = %v, want %v", name, got, want)
		}
	}
	if got := mustAssign(t, a, x); !cmp.Equal(got, alloc("m", "10.0.0.12"), addrCmp) {
		t.Errorf("x = %v, want moved to 10.0.0.12", got)
	}
	if got := mustAssign(t, a, asked); !cmp.Equal(got, alloc("m", "10.0.0.11"), addrCmp) {
		t.Errorf("asked = %v, want the address it asked for", got)
	}
	if got := mustAssign(t, a, kept); !cmp.Equal(got, alloc("k", "10.0.1.10"), addrCmp) {
		t.Errorf("kept = %v, want its address (pool keeps)", got)
	}
	// 10.0.0.12 in use too: x has nowhere to go and keeps it.
	a.SetInUse(addrs("10.0.0.10", "10.0.0.11", "10.0.0.12"))
	if got := mustAssign(t, a, x); !cmp.Equal(got, alloc("m", "10.0.0.12"), addrCmp) {
		t.Errorf("x = %v, want to keep 10.0.0.12 with no free address", got)
	}
}

package ipam

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/groundcloud/groundcloud/internal/config"
)

// TestAssign checks each rule on one Assign, after some Services are
// assigned already.
func TestAssign(t *testing.T) {
	dual := newPool("dual", ranges("10.0.0.0/30", "2001:db8::/64"))
	tests := []struct {
		name    string
		pools   []*config.Pool
		before  []*v1.Service
		svc     *v1.Service
		want    Allocation
		wantErr error
		wantMsg []string // substrings of the error
		notMsg  []string // not in the error: what another namespace must not learn
	}{
		// Pool choice.
		{
			name:  "first auto-assign pool in config order",
			pools: []*config.Pool{newPool("b", ranges("10.0.1.0/30")), newPool("a", ranges("10.0.0.0/30"))},
			svc:   newService("web"),
			want:  alloc("b", "10.0.1.0"),
		},
		{
			name:  "skips pools that are not auto-assign",
			pools: []*config.Pool{newPool("m", ranges("10.0.1.0/30"), manual()), newPool("a", ranges("10.0.0.0/30"))},
			svc:   newService("web"),
			want:  alloc("a", "10.0.0.0"),
		},
		{
			name:  "skips pools that do not allow the namespace",
			pools: []*config.Pool{newPool("team", ranges("10.0.1.0/30"), namespaces("team")), newPool("a", ranges("10.0.0.0/30"))},
			svc:   newService("web"),
			want:  alloc("a", "10.0.0.0"),
		},
		{
			name:  "uses a pool that lists the namespace",
			pools: []*config.Pool{newPool("team", ranges("10.0.1.0/30"), namespaces("x", "team")), newPool("a", ranges("10.0.0.0/30"))},
			svc:   newService("web", inNamespace("team")),
			want:  alloc("team", "10.0.1.0"),
		},
		{
			name:   "skips exhausted pools",
			pools:  []*config.Pool{newPool("a", ranges("10.0.0.0/31")), newPool("b", ranges("10.0.1.0/30"))},
			before: []*v1.Service{newService("x"), newService("y")},
			svc:    newService("web"),
			want:   alloc("b", "10.0.1.0"),
		},
		{
			name:  "named pool, not auto-assign",
			pools: []*config.Pool{newPool("a", ranges("10.0.0.0/30")), newPool("m", ranges("10.0.1.0/30"), manual())},
			svc:   newService("web", withPool("m")),
			want:  alloc("m", "10.0.1.0"),
		},
		{
			name:    "named pool does not exist",
			pools:   []*config.Pool{newPool("a", ranges("10.0.0.0/30")), newPool("t", ranges("10.0.1.0/30"), namespaces("t"))},
			svc:     newService("web", withPool("nope")),
			wantErr: ErrUnknownPool,
			wantMsg: []string{`service default/web: unknown pool: pool "nope" does not exist; set annotation groundcloud.io/pool to one of "a", or remove it`},
		},
		{
			name:    "named pool does not allow the namespace",
			pools:   []*config.Pool{newPool("t", ranges("10.0.1.0/30"), namespaces("t"))},
			svc:     newService("web", withPool("t")),
			wantErr: ErrNamespaceNotAllowed,
			wantMsg: []string{`pool "t" does not allow namespace "default"`, `a pool that allows namespace "default" (there is none yet)`, "ask the cluster operator"},
		},
		{
			name:    "named pool lacks the family",
			pools:   []*config.Pool{newPool("a", ranges("10.0.0.0/30"))},
			svc:     newService("web", withPool("a"), withFamilies(single, v6)),
			wantErr: ErrFamilyUnavailable,
			wantMsg: []string{`pool "a" has no IPv6 addresses; use a pool that has, or change spec.ipFamilies`},
		},
		{
			name:    "named pool exhausted",
			pools:   []*config.Pool{newPool("a", ranges("10.0.0.0/31"), manual())},
			before:  []*v1.Service{newService("x", withPool("a")), newService("y", withPool("a"))},
			svc:     newService("web", withPool("a")),
			wantErr: ErrPoolExhausted,
			wantMsg: []string{`service default/web: pool exhausted: pool "a" has no free IPv4 address (all 2 are held); delete unused LoadBalancer Services`},
		},
		{
			name:    "no pool is auto-assign",
			pools:   []*config.Pool{newPool("m", ranges("10.0.0.0/30"), manual())},
			svc:     newService("web"),
			wantErr: ErrUnknownPool,
			wantMsg: []string{`no pool is auto-assign; set annotation groundcloud.io/pool to one of "m"`},
		},
		{
			name:    "no auto-assign pool allows the namespace",
			pools:   []*config.Pool{newPool("t", ranges("10.0.0.0/30"), namespaces("t")), newPool("m", ranges("10.0.1.0/30"), manual())},
			svc:     newService("web"),
			wantErr: ErrNamespaceNotAllowed,
			wantMsg: []string{`no auto-assign pool allows namespace "default"; set annotation groundcloud.io/pool to one of "m"`},
		},
		{
			name:    "every auto-assign pool exhausted",
			pools:   []*config.Pool{newPool("a", ranges("10.0.0.0/32")), newPool("b", ranges("10.0.1.0/32"))},
			before:  []*v1.Service{newService("x"), newService("y")},
			svc:     newService("web"),
			wantErr: ErrPoolExhausted,
			wantMsg: []string{`no free IPv4 address in pools "a", "b" (those namespace "default" may use)`},
		},
		{
			name:    "no auto-assign pool has the family",
			pools:   []*config.Pool{newPool("a", ranges("10.0.0.0/30")), newPool("b", ranges("10.0.1.0/30"))},
			svc:     newService("web", withFamilies(single, v6)),
			wantErr: ErrFamilyUnavailable,
			wantMsg: []string{`none of pools "a", "b" (those namespace "default" may use) has IPv6 addresses`},
		},

		// Requested addresses.
		{
			name:  "requested address selects its pool, even if not auto-assign",
			pools: []*config.Pool{newPool("a", ranges("10.0.0.0/30")), newPool("m", ranges("10.0.1.0/30"), manual())},
			svc:   newService("web", withIPs("10.0.1.2")),
			want:  alloc("m", "10.0.1.2"),
		},
		{
			name:  "requested address through spec.loadBalancerIP",
			pools: []*config.Pool{newPool("a", ranges("10.0.0.0/30"))},
			svc:   newService("web", withLoadBalancerIP("10.0.0.3")),
			want:  alloc("a", "10.0.0.3"),
		},
		{
			name:  "requested address and a named pool that holds it",
			pools: []*config.Pool{newPool("a", ranges("10.0.0.0/30"))},
			svc:   newService("web", withPool("a"), withIPs("10.0.0.2")),
			want:  alloc("a", "10.0.0.2"),
		},
		{
			name:    "requested address in no pool",
			pools:   []*config.Pool{newPool("a", ranges("10.0.0.0/30"))},
			svc:     newService("web", withIPs("192.0.2.1")),
			wantErr: ErrNotInPool,
			wantMsg: []string{`192.0.2.1 is in no address pool; request an address of pool "a" (10.0.0.0/30), or remove annotation groundcloud.io/load-balancer-ips`},
		},
		{
			name:    "requested address not in the named pool",
			pools:   []*config.Pool{newPool("a", ranges("10.0.0.0/30")), newPool("b", ranges("10.0.1.0/30"))},
			svc:     newService("web", withPool("a"), withIPs("10.0.1.1")),
			wantErr: ErrNotInPool,
			wantMsg: []string{`10.0.1.1 is not in pool "a" (10.0.0.0/30); request an address of the pool, or remove annotation groundcloud.io/pool`},
		},
		{
			name:    "requested address in a pool that does not allow the namespace",
			pools:   []*config.Pool{newPool("t", ranges("10.0.0.0/30"), namespaces("t"), manual())},
			svc:     newService("web", withIPs("10.0.0.1")),
			wantErr: ErrNamespaceNotAllowed,
			wantMsg: []string{`10.0.0.1 is in pool "t", which does not allow namespace "default"`},
		},
		{
			name:    "requested addresses in two pools",
			pools:   []*config.Pool{newPool("a", ranges("10.0.0.0/30")), newPool("b", ranges("2001:db8::/64"))},
			svc:     newService("web", withFamilies(require), withIPs("10.0.0.1,2001:db8::1")),
			wantErr: ErrInvalidRequest,
			wantMsg: []string{`requested addresses 10.0.0.1 (pool "a") and 2001:db8::1 (pool "b") lie in different pools; request addresses of one pool`},
		},
		{
			name:    "requested address held without sharing",
			pools:   []*config.Pool{dual},
			before:  []*v1.Service{newService("x", withPorts("TCP/80"))},
			svc:     newService("web", withIPs("10.0.0.0"), withPorts("TCP/443")),
			wantErr: ErrAddressInUse,
			wantMsg: []string{`service default/web: address in use: 10.0.0.0 is held by default/x, which does not allow sharing`},
		},
		{
			name:    "requested address held under another sharing key",
			pools:   []*config.Pool{dual},
			before:  []*v1.Service{newService("x", withSharing("k1"), withPorts("TCP/80"))},
			svc:     newService("web", withIPs("10.0.0.0"), withSharing("k2"), withPorts("TCP/443")),
			wantErr: ErrAddressInUse,
			wantMsg: []string{`10.0.0.0 is held by default/x with sharing key "k1"; choose another address, or set annotation groundcloud.io/allow-shared-ip to "k1"`},
		},
		{
			name:    "requested address shared, but this Service has no key",
			pools:   []*config.Pool{dual},
			before:  []*v1.Service{newService("x", withSharing("k1"), withPorts("TCP/80"))},
			svc:     newService("web", withIPs("10.0.0.0"), withPorts("TCP/443")),
			wantErr: ErrAddressInUse,
		},
		{
			name:    "requested address shared, port overlaps",
			pools:   []*config.Pool{dual},
			before:  []*v1.Service{newService("x", withSharing("k"), withPorts("TCP/80", "TCP/443"))},
			svc:     newService("web", withIPs("10.0.0.0"), withSharing("k"), withPorts("TCP/443")),
			wantErr: ErrSharingConflict,
			wantMsg: []string{`sharing conflict: port TCP/443 on 10.0.0.0 is used by default/x (sharing key "k"); use another port, or another address`},
		},
		{
			name:   "requested address shared, other ports",
			pools:  []*config.Pool{dual},
			before: []*v1.Service{newService("x", withSharing("k"), withPorts("TCP/53"))},
			svc:    newService("web", withIPs("10.0.0.0"), withSharing("k"), withPorts("UDP/53")),
			want:   alloc("dual", "10.0.0.0"),
		},
		{
			name:    "requested address of another namespace's sharing key",
			pools:   []*config.Pool{dual},
			before:  []*v1.Service{newService("x", inNamespace("n1"), withSharing("k"), withPorts("TCP/53"))},
			svc:     newService("web", withIPs("10.0.0.0"), withSharing("k"), withPorts("UDP/53")),
			wantErr: ErrAddressInUse,
			wantMsg: []string{`service default/web: address in use: 10.0.0.0 is held by a Service of another namespace (sharing keys are scoped to their namespace; pool "dual" does not set allow-cross-namespace-sharing); choose another address`},
			notMsg:  []string{"n1", `"k"`},
		},
		{
			name:    "requested address of another namespace held under another key names no key",
			pools:   []*config.Pool{dual},
			before:  []*v1.Service{newService("x", inNamespace("n1"), withSharing("secret"), withPorts("TCP/53"))},
			svc:     newService("web", withIPs("10.0.0.0"), withSharing("k"), withPorts("UDP/53")),
			wantErr: ErrAddressInUse,
			notMsg:  []string{"n1", "secret"},
		},
		{
			name:  "requested address shared with the same namespace in a pool that does not allow other namespaces",
			pools: []*config.Pool{dual},
			before: []*v1.Service{
				newService("x", inNamespace("n1"), withSharing("k"), withPorts("TCP/53")),
				newService("y", inNamespace("n1"), withIPs("10.0.0.0"), withSharing("k"), withPorts("TCP/54")),
			},
			svc:  newService("web", inNamespace("n1"), withIPs("10.0.0.0"), withSharing("k"), withPorts("UDP/53")),
			want: alloc("dual", "10.0.0.0"),
		},
		{
			name:  "requested address shared across namespaces when the pool allows it",
			pools: []*config.Pool{newPool("open", ranges("10.0.0.0/30"), crossNamespace())},
			before: []*v1.Service{
				newService("x", inNamespace("n1"), withSharing("k"), withPorts("TCP/53")),
				newService("y", inNamespace("n2"), withIPs("10.0.0.0"), withSharing("k"), withPorts("TCP/54")),
			},
			svc:  newService("web", withIPs("10.0.0.0"), withSharing("k"), withPorts("UDP/53")),
			want: alloc("open", "10.0.0.0"),
		},
		{
			name:    "across namespaces when the pool allows it, still only with the same key",
			pools:   []*config.Pool{newPool("open", ranges("10.0.0.0/30"), crossNamespace())},
			before:  []*v1.Service{newService("x", inNamespace("n1"), withSharing("k1"), withPorts("TCP/53"))},
			svc:     newService("web", withIPs("10.0.0.0"), withSharing("k2"), withPorts("UDP/53")),
			wantErr: ErrAddressInUse,
			wantMsg: []string{`10.0.0.0 is held by n1/x with sharing key "k1"`},
		},

		// Families.
		{
			name:  "single-stack IPv6",
			pools: []*config.Pool{dual},
			svc:   newService("web", withFamilies(single, v6)),
			want:  alloc("dual", "2001:db8::"),
		},
		{
			name:  "prefer dual-stack gets both, in the order of the families",
			pools: []*config.Pool{dual},
			svc:   newService("web", withFamilies(prefer, v6, v4)),
			want:  alloc("dual", "2001:db8::", "10.0.0.0"),
		},
		{
			name:  "prefer dual-stack in an IPv4 pool",
			pools: []*config.Pool{newPool("a", ranges("10.0.0.0/30"))},
			svc:   newService("web", withFamilies(prefer, v4, v6)),
			want:  alloc("a", "10.0.0.0"),
		},
		{
			name:  "prefer dual-stack takes a later pool with both families",
			pools: []*config.Pool{newPool("a", ranges("10.0.1.0/30")), dual},
			svc:   newService("web", withFamilies(prefer, v4, v6)),
			want:  alloc("dual", "10.0.0.0", "2001:db8::"),
		},
		{
			name:  "prefer dual-stack with one family: the pool of the primary family",
			pools: []*config.Pool{newPool("a", ranges("10.0.1.0/30")), newPool("b", ranges("2001:db8:1::/64"))},
			svc:   newService("web", withFamilies(prefer, v6, v4)),
			want:  alloc("b", "2001:db8:1::"),
		},
		{
			name:   "prefer dual-stack when one family is exhausted",
			pools:  []*config.Pool{newPool("a", ranges("10.0.0.0/32", "2001:db8::/64"))},
			before: []*v1.Service{newService("x")},
			svc:    newService("web", withFamilies(prefer, v4, v6)),
			want:   alloc("a", "2001:db8::"),
		},
		{
			name:   "prefer dual-stack with a requested address: the other family is optional",
			pools:  []*config.Pool{newPool("a", ranges("10.0.0.0/30"))},
			before: []*v1.Service{newService("x")},
			svc:    newService("web", withFamilies(prefer, v6, v4), withIPs("10.0.0.2")),
			want:   alloc("a", "10.0.0.2"),
		},
		{
			name:  "require dual-stack",
			pools: []*config.Pool{dual},
			svc:   newService("web", withFamilies(require, v4, v6)),
			want:  alloc("dual", "10.0.0.0", "2001:db8::"),
		},
		{
			name:    "require dual-stack, families in different pools",
			pools:   []*config.Pool{newPool("a", ranges("10.0.1.0/30")), newPool("b", ranges("2001:db8:1::/64"))},
			svc:     newService("web", withFamilies(require, v4, v6)),
			wantErr: ErrFamilyUnavailable,
			wantMsg: []string{`none of pools "a", "b" (those namespace "default" may use) has both IPv4 and IPv6 addresses; name a pool that has with annotation groundcloud.io/pool, or set spec.ipFamilyPolicy to PreferDualStack`},
		},
		{
			name:    "require dual-stack in a named IPv4 pool",
			pools:   []*config.Pool{newPool("a", ranges("10.0.1.0/30"))},
			svc:     newService("web", withPool("a"), withFamilies(require, v4, v6)),
			wantErr: ErrFamilyUnavailable,
			wantMsg: []string{`pool "a" has no IPv6 addresses; use a pool that has, or set spec.ipFamilyPolicy to PreferDualStack`},
		},
		{
			name:    "require dual-stack, IPv4 exhausted",
			pools:   []*config.Pool{newPool("a", ranges("10.0.0.0/32", "2001:db8::/64"))},
			before:  []*v1.Service{newService("x")},
			svc:     newService("web", withFamilies(require, v4, v6)),
			wantErr: ErrPoolExhausted,
		},

		// Picking the lowest free address.
		{
			name:   "lowest free address fills gaps",
			pools:  []*config.Pool{newPool("a", ranges("10.0.0.0/29"))},
			before: []*v1.Service{newService("x"), newService("y", withIPs("10.0.0.2")), newService("z")},
			svc:    newService("web"),
			want:   alloc("a", "10.0.0.3"),
		},
		{
			name:  "ranges are searched in address order, not file order",
			pools: []*config.Pool{newPool("a", ranges("10.0.9.0/30", "10.0.1.0/30"))},
			svc:   newService("web"),
			want:  alloc("a", "10.0.1.0"),
		},
		{
			name:   "next range when the lowest is full",
			pools:  []*config.Pool{newPool("a", ranges("10.0.9.0/30", "10.0.1.0/31"))},
			before: []*v1.Service{newService("x"), newService("y")},
			svc:    newService("web"),
			want:   alloc("a", "10.0.9.0"),
		},
		{
			name:   "the broadcast address of a CIDR is used",
			pools:  []*config.Pool{newPool("a", ranges("10.0.0.0/30"))},
			before: []*v1.Service{newService("x"), newService("y"), newService("z")},
			svc:    newService("web"),
			want:   alloc("a", "10.0.0.3"),
		},
		{
			name:   "the last addresses of the address space",
			pools:  []*config.Pool{newPool("a", ranges("255.255.255.254/31", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe/127"))},
			before: []*v1.Service{newService("x"), newService("y", withFamilies(single, v6))},
			svc:    newService("web", withFamilies(prefer, v4, v6)),
			want:   alloc("a", "255.255.255.255", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
		},
		{
			name:  "the last addresses of the address space, full",
			pools: []*config.Pool{newPool("a", ranges("255.255.255.255/32"))},
			before: []*v1.Service{
				newService("x"),
			},
			svc:     newService("web"),
			wantErr: ErrPoolExhausted,
		},
		{
			name:  "an IPv6 range crossing a 64-bit boundary",
			pools: []*config.Pool{newPool("a", ranges("2001:db8::ffff:ffff:ffff:ffff-2001:db8:0:1::ffff"))},
			before: []*v1.Service{
				newService("x", withFamilies(single, v6)),
			},
			svc:  newService("web", withFamilies(single, v6)),
			want: alloc("a", "2001:db8:0:1::"),
		},

		// Sharing on auto-assign.
		{
			name:   "without a sharing key, never a held address",
			pools:  []*config.Pool{newPool("a", ranges("10.0.0.0/30"))},
			before: []*v1.Service{newService("x", withSharing("k"), withPorts("TCP/53"))},
			svc:    newService("web", withPorts("UDP/53")),
			want:   alloc("a", "10.0.0.1"),
		},
		{
			name:   "with a sharing key, an address the key holds before a lower free one",
			pools:  []*config.Pool{newPool("a", ranges("10.0.0.0/30"))},
			before: []*v1.Service{newService("x", withIPs("10.0.0.2"), withSharing("k"), withPorts("TCP/53"))},
			svc:    newService("web", withSharing("k"), withPorts("UDP/53")),
			want:   alloc("a", "10.0.0.2"),
		},
		{
			name:  "with a sharing key, the lowest address the key holds that it may share",
			pools: []*config.Pool{newPool("a", ranges("10.0.0.0/29"))},
			before: []*v1.Service{
				newService("x", withIPs("10.0.0.2"), withSharing("k"), withPorts("TCP/53")),
				newService("y", withIPs("10.0.0.5"), withSharing("k"), withPorts("TCP/80")),
				newService("z", withIPs("10.0.0.4"), withSharing("k"), withPorts("TCP/80")),
			},
			svc:  newService("web", withSharing("k"), withPorts("TCP/53")),
			want: alloc("a", "10.0.0.4"),
		},
		{
			name:   "with a sharing key, a free address when ports overlap",
			pools:  []*config.Pool{newPool("a", ranges("10.0.0.0/30"))},
			before: []*v1.Service{newService("x", withIPs("10.0.0.2"), withSharing("k"), withPorts("TCP/53"))},
			svc:    newService("web", withSharing("k"), withPorts("TCP/53")),
			want:   alloc("a", "10.0.0.0"),
		},
		{
			name:  "with a sharing key, the pool where the key holds an address first",
			pools: []*config.Pool{newPool("a", ranges("10.0.0.0/30")), newPool("b", ranges("10.0.1.0/30"))},
			before: []*v1.Service{
				newService("x", withIPs("10.0.1.1"), withSharing("k"), withPorts("TCP/53")),
			},
			svc:  newService("web", withSharing("k"), withPorts("UDP/53")),
			want: alloc("b", "10.0.1.1"),
		},
		{
			name:   "with a sharing key, not an address another namespace's key holds",
			pools:  []*config.Pool{newPool("a", ranges("10.0.0.0/30"))},
			before: []*v1.Service{newService("x", inNamespace("n1"), withIPs("10.0.0.2"), withSharing("k"), withPorts("TCP/53"))},
			svc:    newService("web", withSharing("k"), withPorts("UDP/53")),
			want:   alloc("a", "10.0.0.0"),
		},
		{
			name:   "with a sharing key, an address another namespace's key holds when the pool allows it",
			pools:  []*config.Pool{newPool("a", ranges("10.0.0.0/30"), crossNamespace())},
			before: []*v1.Service{newService("x", inNamespace("n1"), withIPs("10.0.0.2"), withSharing("k"), withPorts("TCP/53"))},
			svc:    newService("web", withSharing("k"), withPorts("UDP/53")),
			want:   alloc("a", "10.0.0.2"),
		},
		{
			name:  "with a sharing key, a pool where only another namespace's key holds an address does not go first",
			pools: []*config.Pool{newPool("a", ranges("10.0.0.0/30")), newPool("b", ranges("10.0.1.0/30"))},
			before: []*v1.Service{
				newService("x", inNamespace("n1"), withIPs("10.0.1.1"), withSharing("k"), withPorts("TCP/53")),
			},
			svc:  newService("web", withSharing("k"), withPorts("UDP/53")),
			want: alloc("a", "10.0.0.0"),
		},
		{
			name:  "with a sharing key, only inside the named pool",
			pools: []*config.Pool{newPool("a", ranges("10.0.0.0/30")), newPool("b", ranges("10.0.1.0/30"))},
			before: []*v1.Service{
				newService("x", withIPs("10.0.1.1"), withSharing("k"), withPorts("TCP/53")),
			},
			svc:  newService("web", withPool("a"), withSharing("k"), withPorts("UDP/53")),
			want: alloc("a", "10.0.0.0"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := New(tt.pools)
			for _, svc := range tt.before {
				mustAssign(t, a, svc)
			}
			got, err := a.Assign(mustRequest(t, tt.svc))
			if tt.wantErr != nil {
				checkErr(t, err, tt.wantErr, tt.wantMsg...)
				for _, m := range tt.notMsg {
					if strings.Contains(err.Error(), m) {
						t.Errorf("error %q\nreveals %q", err, m)
					}
				}
				if _, ok := a.Lookup(key(tt.svc.Namespace + "/" + tt.svc.Name)); ok {
					t.Errorf("failed Assign recorded an allocation")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, addrCmp); diff != "" {
				t.Errorf("allocation (-want +got):\n%s", diff)
			}
		})
	}
}

func checkErr(t *testing.T, err, want error, msgs ...string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error = %v, want %v", err, want)
	}
	if !strings.HasPrefix(err.Error(), "service ") {
		t.Errorf("error %q does not name the Service first", err)
	}
	for _, m := range msgs {
		if !strings.Contains(err.Error(), m) {
			t.Errorf("error %q\ndoes not contain %q", err, m)
		}
	}
}

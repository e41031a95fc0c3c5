package ipam

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/groundcloud/groundcloud/internal/config"
)

// propertyOps is how many random operations TestProperties drives. It is
// not scaled down with -short: the run takes a few seconds.
const propertyOps = 100_000

// TestProperties drives random operations — create, update (ports,
// sharing key, requested addresses, pool, families), delete, re-ensure,
// pool reload, restart through Restore, and a colliding Restore — from a
// fixed seed, and after each one checks the Allocator against a model of
// the records it should hold:
//
//   - no address, protocol and port has two owners; an address is shared
//     only by Services with the same non-empty sharing key; a Service joins
//     Services of another namespace only in a pool that allows it;
//   - every allocation lies in a pool that allows its namespace, or is
//     reported by Orphans (and Orphans reports nothing else);
//   - Lookup, Usage and the Allocator's indexes agree with the model;
//   - a successful Assign fits its request, picks the lowest free address
//     when it picks a free one, keeps what the Service held when the
//     request is unchanged, and is idempotent; a failed one changes
//     nothing and is justified by the state before it;
//   - a restart rebuilds the same state; deleting everything leaks nothing.
func TestProperties(t *testing.T) {
	start := time.Now()
	m := newPropModel(t, rand.New(rand.NewPCG(20261130, 1)))
	for m.step = 0; m.step < propertyOps; m.step++ {
		m.randomOp()
		m.checkInvariants()
	}
	for _, k := range slices.SortedFunc(maps.Keys(m.records), compareKeys) {
		m.a.Release(k)
		m.deleteRecord(k)
		m.checkInvariants()
	}
	checkEmpty(t, m.a)
	t.Logf("%d operations in %v: %v", propertyOps, time.Since(start).Round(time.Millisecond), m.stats)
	m.checkCoverage()
}

type propModel struct {
	t       *testing.T
	rng     *rand.Rand
	step    int
	a       *Allocator
	pools   []*config.Pool
	records map[types.NamespacedName]*modelRecord
	hold    map[netip.Addr][]types.NamespacedName // the holders of each address in records
	keys    []types.NamespacedName
	stats   map[string]int
}

// modelRecord is what the model expects a Service to hold, and the request
// that gave it.
type modelRecord struct {
	alloc   Allocation
	sharing string
	ports   []Port
	req     Request
	spec    svcSpec
}

// poolVariants are the configs a reload picks from. Within one, pools do
// not overlap (config validates that); across them, ranges move between
// pools, shrink, vanish and change namespaces and auto-assign.
var poolVariants = [][]*config.Pool{
	{
		newPool("a", ranges("10.0.0.0/29", "2001:db8:a::/64")),
		newPool("b", ranges("10.0.1.0-10.0.1.3")),
		newPool("m", ranges("10.0.2.0/30", "2001:db8:2::/126"), manual()),
		newPool("t", ranges("10.0.3.0/30", "2001:db8:3::/126"), namespaces("team")),
		newPool("top", ranges("255.255.255.252/30", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffc/126"), manual()),
	},
	{
		newPool("a", ranges("10.0.0.0/30", "2001:db8:a::/64"), crossNamespace()),
		newPool("c", ranges("10.0.1.0/31", "10.0.0.4/31")),
		newPool("m", ranges("10.0.2.0/30", "2001:db8:2::/126")),
		newPool("t", ranges("10.0.3.0/30"), namespaces("team", "other")),
		newPool("top", ranges("255.255.255.252/30", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffc/126"), manual()),
	},
	{
		newPool("t", ranges("10.0.3.0/29", "2001:db8:3::/125"), namespaces("team")),
		newPool("a", ranges("10.0.0.0/29"), manual(), namespaces("default")),
		newPool("b", ranges("10.0.1.0/30", "2001:db8:a::/64")),
	},
	{
		newPool("b", ranges("10.0.1.0-10.0.1.3"), crossNamespace()),
		newPool("a", ranges("10.0.0.0/29", "2001:db8:a::/64")),
		newPool("top", ranges("255.255.255.252/30", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffc/126")),
		newPool("m", ranges("10.0.2.0/30", "2001:db8:2::/126"), manual()),
		newPool("t", ranges("10.0.3.0/30", "2001:db8:3::/126"), namespaces("team")),
	},
}

var (
	propPoolNames = []string{"a", "b", "c", "m", "t", "top", "nope"}
	propPorts     = []string{"TCP/53", "UDP/53", "TCP/80", "TCP/443", "SCTP/9"}
	propAddrs     = [2][]string{
		{"10.0.0.0", "10.0.0.3", "10.0.0.5", "10.0.0.7", "10.0.1.1", "10.0.1.3", "10.0.2.2", "10.0.3.1", "10.0.3.6", "255.255.255.255", "192.0.2.1"},
		{"2001:db8:a::", "2001:db8:a::1", "2001:db8:2::3", "2001:db8:3::1", "2001:db8:3::6", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "2001:db8:ff::1"},
	}
)

func newPropModel(t *testing.T, rng *rand.Rand) *propModel {
	m := &propModel{t: t, rng: rng, pools: poolVariants[0], records: map[types.NamespacedName]*modelRecord{}, hold: map[netip.Addr][]types.NamespacedName{}, stats: map[string]int{}}
	m.a = New(m.pools)
	for i := range 30 {
		ns := []string{"default", "team", "other"}[i%3]
		m.keys = append(m.keys, types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("s%d", i)})
	}
	return m
}

func (m *propModel) fatalf(format string, args ...any) {
	m.t.Helper()
	m.t.Fatalf("step %d: "+format, append([]any{m.step}, args...)...)
}

func (m *propModel) randomOp() {
	switch r := m.rng.IntN(100); {
	case r < 30:
		m.assign(m.keys[m.rng.IntN(len(m.keys))], m.randomSpec())
	case r < 62:
		if k, ok := m.randomRecord(); ok {
			m.assign(k, m.mutate(m.records[k].spec))
		}
	case r < 82:
		k := m.keys[m.rng.IntN(len(m.keys))]
		m.a.Release(k)
		m.deleteRecord(k)
		m.stats["release"]++
	case r < 93:
		m.reensure()
	case r < 96:
		m.pools = poolVariants[m.rng.IntN(len(poolVariants))]
		m.a.SetPools(m.pools)
		m.stats["reload"]++
	case r < 98:
		m.restart()
	default:
		m.collidingRestore()
	}
}

func (m *propModel) randomRecord() (types.NamespacedName, bool) {
	if len(m.records) == 0 {
		return types.NamespacedName{}, false
	}
	keys := slices.SortedFunc(maps.Keys(m.records), compareKeys)
	return keys[m.rng.IntN(len(keys))], true
}

// svcSpec is the part of a Service the allocator reads.
type svcSpec struct {
	policy  v1.IPFamilyPolicy
	fams    []v1.IPFamily
	pool    string
	ips     []string
	legacy  bool // the one requested address in spec.loadBalancerIP
	sharing string
	ports   []string
}

func (s svcSpec) service(k types.NamespacedName) *v1.Service {
	mods := []func(*v1.Service){inNamespace(k.Namespace), withFamilies(s.policy, s.fams...), withPorts(s.ports...)}
	if s.pool != "" {
		mods = append(mods, withPool(s.pool))
	}
	switch {
	case s.legacy && len(s.ips) == 1:
		mods = append(mods, withLoadBalancerIP(s.ips[0]))
	case len(s.ips) > 0:
		mods = append(mods, withIPs(strings.Join(s.ips, ",")))
	}
	if s.sharing != "" {
		mods = append(mods, withSharing(s.sharing))
	}
	return newService(k.Name, mods...)
}

func (m *propModel) randomSpec() svcSpec {
	var s svcSpec
	for _, f := range []func(*svcSpec){m.randFamilies, m.randPool, m.randIPs, m.randSharing, m.randPorts} {
		f(&s)
	}
	return s
}

// mutate changes one aspect of s, as an update of the Service would.
func (m *propModel) mutate(s svcSpec) svcSpec {
	s.ips = slices.Clone(s.ips)
	[]func(*svcSpec){m.randFamilies, m.randPool, m.randIPs, m.randSharing, m.randPorts}[m.rng.IntN(5)](&s)
	return s
}

func (m *propModel) randFamilies(s *svcSpec) {
	switch r := m.rng.IntN(20); {
	case r < 12:
		s.policy, s.fams = single, []v1.IPFamily{[]v1.IPFamily{v4, v4, v6}[m.rng.IntN(3)]}
	case r < 17:
		s.policy, s.fams = prefer, []v1.IPFamily{v4, v6}
	default:
		s.policy, s.fams = require, []v1.IPFamily{v4, v6}
	}
	if len(s.fams) == 2 && m.rng.IntN(2) == 0 {
		s.fams = []v1.IPFamily{v6, v4}
	}
}

func (m *propModel) randPool(s *svcSpec) {
	s.pool = ""
	if m.rng.IntN(100) < 40 {
		s.pool = propPoolNames[m.rng.IntN(len(propPoolNames))]
	}
}

func (m *propModel) randIPs(s *svcSpec) {
	s.ips, s.legacy = nil, false
	if m.rng.IntN(100) < 65 {
		return
	}
	fams := s.fams
	if m.rng.IntN(20) == 0 {
		fams = []v1.IPFamily{v4, v6} // sometimes one the Service cannot have
	}
	for i, f := range fams {
		if i == 0 || m.rng.IntN(2) == 0 {
			list := propAddrs[familyIndex(f)]
			s.ips = append(s.ips, list[m.rng.IntN(len(list))])
		}
	}
	s.legacy = len(s.ips) == 1 && m.rng.IntN(3) == 0
}

func (m *propModel) randSharing(s *svcSpec) {
	s.sharing = []string{"", "", "k1", "k1", "k2"}[m.rng.IntN(5)]
}

func (m *propModel) randPorts(s *svcSpec) {
	s.ports = []string{propPorts[m.rng.IntN(len(propPorts))]}
	if m.rng.IntN(3) == 0 {
		s.ports = append(s.ports, propPorts[m.rng.IntN(len(propPorts))])
	}
}

func (m *propModel) assign(k types.NamespacedName, spec svcSpec) {
	req, err := RequestFromService(spec.service(k))
	if err != nil {
		if !errors.Is(err, ErrInvalidRequest) || err.Error() == "" {
			m.fatalf("RequestFromService: %v", err)
		}
		m.stats["invalid service"]++
		return
	}
	prev := m.records[k]
	got, err := m.a.Assign(req)
	if err != nil {
		m.checkFailure(req, prev, err)
		return
	}
	m.checkSuccess(req, prev, got)
	if again, err := m.a.Assign(req); err != nil || !equalAlloc(got, again) {
		m.fatalf("Assign(%s) is not idempotent: %v then %v, %v", k, got, again, err)
	}
	m.setRecord(k, &modelRecord{alloc: got, sharing: req.SharingKey, ports: normalizePorts(req.Ports), req: req, spec: spec})
}

// reensure assigns a Service its last request again, as on every CCM
// start: it must succeed and keep every address the Service holds.
func (m *propModel) reensure() {
	k, ok := m.randomRecord()
	if !ok {
		return
	}
	rec := m.records[k]
	got, err := m.a.Assign(rec.req)
	if err != nil {
		m.fatalf("re-ensure %s with an unchanged request: %v", k, err)
	}
	for _, addr := range rec.alloc.Addresses {
		if !slices.Contains(got.Addresses, addr) {
			m.fatalf("re-ensure %s moved it: %v, was %v", k, got, rec.alloc)
		}
	}
	if len(got.Addresses) > len(rec.alloc.Addresses) {
		m.stats["re-ensure gained a family"]++
	}
	m.setRecord(k, &modelRecord{alloc: got, sharing: rec.sharing, ports: rec.ports, req: rec.req, spec: rec.spec})
	m.stats["re-ensure"]++
}

// restart builds a new Allocator from the records, in random order, and
// checks it is the same as the old one.
func (m *propModel) restart() {
	b := New(m.pools)
	keys := slices.SortedFunc(maps.Keys(m.records), compareKeys)
	m.rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	for _, k := range keys {
		rec := m.records[k]
		if err := b.Restore(k, rec.alloc, Terms{SharingKey: rec.sharing, Ports: rec.ports}); err != nil {
			m.fatalf("restore: %v", err)
		}
	}
	if diff := cmp.Diff(m.a.Usage(), b.Usage()); diff != "" {
		m.fatalf("usage after restart (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(m.a.Orphans(), b.Orphans(), addrCmp); diff != "" {
		m.fatalf("orphans after restart (-before +after):\n%s", diff)
	}
	m.a = b
	m.stats["restart"]++
}

// collidingRestore restores, for a Service with no record, a record that
// takes another's address: it must be refused.
func (m *propModel) collidingRestore() {
	k, ok := m.randomRecord()
	if !ok {
		return
	}
	rec := m.records[k]
	ghost := types.NamespacedName{Namespace: "ghost", Name: fmt.Sprint(m.step)}
	alloc := Allocation{Pool: rec.alloc.Pool, Addresses: rec.alloc.Addresses[:1]}
	sharing, ports, want := "", rec.ports, ErrAddressInUse
	if rec.sharing != "" && m.rng.IntN(2) == 0 {
		sharing, want = rec.sharing, ErrSharingConflict
	}
	if err := m.a.Restore(ghost, alloc, Terms{SharingKey: sharing, Ports: ports}); !errors.Is(err, want) {
		m.fatalf("colliding restore of %v (%v): error %v, want %v", alloc, rec.alloc, err, want)
	}
	if _, ok := m.a.Lookup(ghost); ok {
		m.fatalf("a refused restore was recorded")
	}
	m.stats["colliding restore"]++
}

// setRecord records what k holds, keeping the holders index.
func (m *propModel) setRecord(k types.NamespacedName, rec *modelRecord) {
	m.deleteRecord(k)
	m.records[k] = rec
	for _, addr := range rec.alloc.Addresses {
		ks := m.hold[addr]
		i, _ := slices.BinarySearchFunc(ks, k, compareKeys)
		m.hold[addr] = slices.Insert(ks, i, k)
	}
}

func (m *propModel) deleteRecord(k types.NamespacedName) {
	rec, ok := m.records[k]
	if !ok {
		return
	}
	delete(m.records, k)
	for _, addr := range rec.alloc.Addresses {
		ks := slices.DeleteFunc(m.hold[addr], func(o types.NamespacedName) bool { return o == k })
		if len(ks) == 0 {
			delete(m.hold, addr)
		} else {
			m.hold[addr] = ks
		}
	}
}

// holders maps each held address to the Services holding it, sorted, per
// the model.
func (m *propModel) holders() map[netip.Addr][]types.NamespacedName { return m.hold }

package dataplane

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/knftables"
)

func mustSync(t *testing.T, s *Syncer, st State) {
	t.Helper()
	res, err := s.Sync(context.Background(), st)
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if res.CleanupErr != nil {
		t.Fatalf("Sync: conntrack clean-up: %v", res.CleanupErr)
	}
}

func TestFullSyncGolden(t *testing.T) {
	s, v4, v6, _ := newFakeSyncer()
	mustSync(t, s, realisticState())
	checkGolden(t, "full-sync", transactions(v4, v6))
}

func TestPartialSyncGolden(t *testing.T) {
	s, v4, v6, ct := newFakeSyncer()
	mustSync(t, s, realisticState())
	mustSync(t, s, withHealth(realisticState(), "node-b", false))
	tx := transactions(v4, v6)
	checkGolden(t, "partial-sync-node-b-unhealthy", tx)

	// Only the buckets node-b held move: they are deleted from the bucket
	// maps of the service ports it served and added again; no chain, rule
	// or other element is touched.
	before := Desired(realisticState())
	for _, fam := range []struct {
		f    family
		fake *knftables.Fake
	}{{ipv4, v4}, {ipv6, v6}} {
		want := txOps{deletedElements: map[string][]string{}, addedElements: map[string][]string{}}
		for _, c := range []struct {
			svc string
			p   Port
		}{
			{"shop/web", Port{Protocol: TCP, Port: 80}}, {"shop/web", Port{Protocol: TCP, Port: 443}},
			{"infra/dns", Port{Protocol: UDP, Port: 53}}, {"infra/dns", Port{Protocol: TCP, Port: 53}},
			{"shop/admin", Port{Protocol: TCP, Port: 8443}},
		} {
			if fam.f.nft == knftables.IPv6Family && c.svc == "shop/admin" {
				continue // IPv4 only
			}
			name := bucketMapName(c.svc, c.p)
			var keys []string
			for i, v := range bucketTexts(before.Table(fam.f.nft).Maps[name]) {
				if strings.HasPrefix(v, firstAddr(fam.f, Backend{Addrs: addrs(nodeB...)}).String()+" . ") {
					keys = append(keys, bucketKey(i))
				}
			}
			if len(keys) == 0 {
				t.Fatalf("%s: node-b holds no bucket of %s", fam.f.ip, name)
			}
			want.deletedElements[name], want.addedElements[name] = keys, keys
		}
		got := parseOps(t, fam.fake.LastTransaction.String())
		if diff := cmp.Diff(want.sorted(), got.sorted(), cmp.AllowUnexported(txOps{})); diff != "" {
			t.Errorf("%s: partial sync (-want +got):\n%s", fam.f.ip, diff)
		}
	}

	// UDP flows to node-b are deleted from conntrack, TCP ones drain.
	wantFlows := [][]Flow{{
		{VIP: addr("192.0.2.101"), Port: 53, Backend: addr("192.0.2.12"), NodePort: 30053},
		{VIP: addr("2001:db8::101"), Port: 53, Backend: addr("2001:db8::12"), NodePort: 30053},
	}}
	if diff := cmp.Diff(wantFlows, ct.deleted, cmp.Comparer(func(a, b Flow) bool { return a == b })); diff != "" {
		t.Errorf("conntrack deletions (-want +got):\n%s", diff)
	}
}

func TestSyncWithoutChangeRunsNothing(t *testing.T) {
	s, v4, v6, ct := newFakeSyncer()
	mustSync(t, s, realisticState())
	last4, last6 := v4.LastTransaction, v6.LastTransaction
	mustSync(t, s, realisticState())
	if v4.LastTransaction != last4 || v6.LastTransaction != last6 {
		t.Errorf("a sync without changes ran a transaction:\n%s", transactions(v4, v6))
	}
	if len(ct.deleted) != 0 {
		t.Errorf("conntrack deletions without changes: %v", ct.deleted)
	}
}

// failingNFT fails Run while fail is set.
type failingNFT struct {
	knftables.Interface
	fail bool
}

func (f *failingNFT) Run(ctx context.Context, tx *knftables.Transaction) error {
	if f.fail {
		return errors.New("injected failure")
	}
	return f.Interface.Run(ctx, tx)
}

func TestSyncAfterErrorIsFull(t *testing.T) {
	v4 := knftables.NewFake(knftables.IPv4Family, TableName)
	failing := &failingNFT{Interface: v4}
	s := NewSyncer(failing, nil, nil, nil)
	mustSync(t, s, realisticState())

	failing.fail = true
	if _, err := s.Sync(context.Background(), withHealth(realisticState(), "node-b", false)); err == nil {
		t.Fatal("Sync succeeded despite the failing transaction")
	}
	failing.fail = false
	mustSync(t, s, withHealth(realisticState(), "node-b", false))
	if tx := v4.LastTransaction.String(); !strings.HasPrefix(tx, "add table ip groundcloud") {
		t.Errorf("the sync after an error is not a full one:\n%.300s", tx)
	}
	mustSync(t, s, realisticState())
	if tx := v4.LastTransaction.String(); strings.HasPrefix(tx, "add table") {
		t.Errorf("the sync after a successful full one is full again:\n%.300s", tx)
	}
}

func TestFullSyncIsIdempotentAndRemovesStaleObjects(t *testing.T) {
	s, v4, v6, _ := newFakeSyncer()
	// What a previous agent may have left: a chain and a map we no longer make.
	for _, fake := range []*knftables.Fake{v4, v6} {
		tx := fake.NewTransaction()
		tx.Add(&knftables.Table{Comment: knftables.PtrTo(tableComment)})
		tx.Add(&knftables.Chain{Name: "svc-OLD-gone/svc/tcp/80"})
		tx.Add(&knftables.Rule{Chain: "svc-OLD-gone/svc/tcp/80", Rule: "drop"})
		tx.Add(&knftables.Map{Name: "old-map", Type: "ipv4_addr : ipv4_addr"})
		if err := fake.Run(context.Background(), tx); err != nil {
			t.Fatal(err)
		}
	}
	mustSync(t, s, realisticState())
	first := dump(v4, v6)
	if strings.Contains(first, "OLD") || strings.Contains(first, "old-map") {
		t.Errorf("stale objects survive the full sync:\n%s", first)
	}
	s.ForceFullSync()
	mustSync(t, s, realisticState())
	if second := dump(v4, v6); second != first {
		t.Errorf("a second full sync changed the ruleset:\n%s", cmp.Diff(first, second))
	}
	if want := freshDump(t, realisticState()); first != want {
		t.Errorf("full sync over old objects differs from one on an empty table:\n%s", cmp.Diff(want, first))
	}
}

// dump is the content of the fakes' tables with each map's elements in
// sorted order: the Fake keeps them in the order they were added, the
// kernel in none that matters.
func dump(fakes ...*knftables.Fake) string {
	var b strings.Builder
	for _, f := range fakes {
		var elements []string
		for _, line := range strings.Split(f.Dump(), "\n") {
			if strings.HasPrefix(line, "add element ") {
				elements = append(elements, line)
				continue
			}
			if line != "" {
				b.WriteString(line + "\n")
			}
		}
		slices.Sort(elements)
		for _, e := range elements {
			b.WriteString(e + "\n")
		}
	}
	return b.String()
}

// freshDump is the ruleset a new Syncer writes for st on empty tables.
func freshDump(t *testing.T, st State) string {
	t.Helper()
	s, v4, v6, _ := newFakeSyncer()
	mustSync(t, s, st)
	return dump(v4, v6)
}

// Each partial sync must leave the same ruleset as a full sync of the same
// state on empty tables, and must never "add" an element over an existing
// one, which the kernel refuses (the Fake would silently overwrite it).
func TestPartialSyncEqualsFullSync(t *testing.T) {
	base := realisticState()
	steps := []struct {
		name string
		edit func(*State)
	}{
		{"node-b unhealthy", func(s *State) { *s = withHealth(*s, "node-b", false) }},
		{"node-b healthy again", func(s *State) { *s = withHealth(*s, "node-b", true) }},
		{"broken gets a healthy backend", func(s *State) { s.Services[3].Backends[0].Healthy = true }},
		{"all of web unhealthy", func(s *State) {
			for i := range s.Services[0].Backends {
				s.Services[0].Backends[i].Healthy = false
			}
		}},
		{"web back", func(s *State) { *s = withHealth(*s, "node-a", true) }},
		{"web routed to the host (BGP)", func(s *State) { s.Services[0].Routed = true }},
		{"broken routed too", func(s *State) { s.Services[3].Routed = true }},
		{"web held on the interface again", func(s *State) { s.Services[0].Routed = false }},
		{"no VIP routed, routed-vips goes", func(s *State) { s.Services[3].Routed = false }},
		{"node-c removed from web", func(s *State) { s.Services[0].Backends = s.Services[0].Backends[:2] }},
		{"web port 443 removed", func(s *State) { s.Services[0].Ports = s.Services[0].Ports[:1] }},
		{"admin source ranges changed", func(s *State) { s.Services[2].SourceRanges = s.Services[2].SourceRanges[:1] }},
		{"admin source ranges removed", func(s *State) { s.Services[2].SourceRanges = nil }},
		{"dns IPv6 VIP removed", func(s *State) { s.Services[1].VIPs = s.Services[1].VIPs[:1] }},
		{"dns removed", func(s *State) { s.Services = slices.Delete(s.Services, 1, 2) }},
		{"new service", func(s *State) {
			s.Services = append(s.Services, newService("blog/www", withVIPs("192.0.2.110"), withPort(TCP, 80, 31080),
				withBackend("node-c", true, nodeC...)))
		}},
		{"web and www join a bucket group", func(s *State) {
			for i := range s.Services {
				s.Services[i].BucketGroup = "cluster"
			}
			s.Services[len(s.Services)-1].Backends = slices.Clone(s.Services[0].Backends)
		}},
		{"node-a unhealthy in the group", func(s *State) { *s = withHealth(*s, "node-a", false) }},
		{"www leaves the group (a switch to Local)", func(s *State) { s.Services[len(s.Services)-1].BucketGroup = "" }},
		{"www back in the group", func(s *State) { s.Services[len(s.Services)-1].BucketGroup = "cluster" }},
		{"web leaves the group, its map goes", func(s *State) { s.Services[0].BucketGroup = "" }},
		{"everything removed", func(s *State) { s.Services = nil }},
	}
	s, v4, v6, _ := newFakeSyncer()
	mustSync(t, s, base)
	state := base
	for _, step := range steps {
		// Copy the services so that edits do not reach earlier states.
		state = State{Services: cloneServices(state.Services)}
		step.edit(&state)
		before := map[*knftables.Fake]string{v4: v4.Dump(), v6: v6.Dump()}
		last := map[*knftables.Fake]*knftables.Transaction{v4: v4.LastTransaction, v6: v6.LastTransaction}
		mustSync(t, s, state)
		if got, want := dump(v4, v6), freshDump(t, state); got != want {
			t.Errorf("%s: partial sync differs from full sync:\n%s", step.name, cmp.Diff(want, got))
		}
		for fake, dump := range before {
			// A sync without operations runs no transaction.
			if fake.LastTransaction != last[fake] {
				checkNoElementOverwrite(t, step.name, dump, fake.LastTransaction.String())
			}
		}
	}
}

func cloneServices(in []Service) []Service {
	out := slices.Clone(in)
	for i := range out {
		out[i].VIPs = slices.Clone(out[i].VIPs)
		out[i].Ports = slices.Clone(out[i].Ports)
		out[i].Backends = slices.Clone(out[i].Backends)
		out[i].SourceRanges = slices.Clone(out[i].SourceRanges)
	}
	return out
}

var elementOp = regexp.MustCompile(`^(add|delete) element (\S+ \S+ \S+) \{ (.*?)(?: : .*)? \}$`)

// checkNoElementOverwrite fails when tx adds a map element whose key exists
// in the dump (the table before tx) and was not deleted earlier in tx.
func checkNoElementOverwrite(t *testing.T, step, dump, tx string) {
	t.Helper()
	present := map[string]bool{}
	for _, line := range strings.Split(dump, "\n") {
		if m := elementOp.FindStringSubmatch(line); m != nil {
			present[m[2]+" "+m[3]] = true
		}
	}
	for _, line := range strings.Split(tx, "\n") {
		if strings.HasPrefix(line, "flush map ") {
			prefix := strings.TrimPrefix(line, "flush map ") + " "
			for k := range present {
				if strings.HasPrefix(k, prefix) {
					delete(present, k)
				}
			}
		}
		m := elementOp.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		key := m[2] + " " + m[3]
		if m[1] == "delete" {
			delete(present, key)
		} else if present[key] {
			t.Errorf("%s: %q overwrites an existing element; the kernel refuses that", step, line)
		}
	}
}

// A failed conntrack clean-up is reported, fails nothing (the tables carry
// the new state, no full sync is forced) and is retried.
func TestConntrackDeletionIsRetried(t *testing.T) {
	s, v4, v6, ct := newFakeSyncer()
	mustSync(t, s, realisticState())
	down := withHealth(realisticState(), "node-b", false)
	ct.err = errors.New("injected failure")
	res, err := s.Sync(context.Background(), down)
	if err != nil {
		t.Fatalf("Sync failed because the conntrack clean-up did: %v", err)
	}
	if !errors.Is(res.CleanupErr, ct.err) {
		t.Fatalf("Result.CleanupErr = %v, want the injected failure", res.CleanupErr)
	}
	if got, want := dump(v4, v6), freshDump(t, down); got != want {
		t.Errorf("the tables do not carry the new state after a failed clean-up:\n%s", cmp.Diff(want, got))
	}
	ct.err = nil
	mustSync(t, s, down)
	if tx := v4.LastTransaction.String(); strings.HasPrefix(tx, "add table") {
		t.Errorf("a failed conntrack clean-up forced a full sync:\n%.300s", tx)
	}
	if len(ct.deleted) != 2 || !slices.Equal(ct.deleted[0], ct.deleted[1]) {
		t.Errorf("failed deletion not retried: %v", ct.deleted)
	}
	mustSync(t, s, down)
	if len(ct.deleted) != 2 {
		t.Errorf("deletion repeated after success: %v", ct.deleted)
	}
}

// A flow that failed to be deleted but is in use again is not deleted later.
func TestConntrackRetryDropsFlowsInUseAgain(t *testing.T) {
	s, _, _, ct := newFakeSyncer()
	mustSync(t, s, realisticState())
	ct.err = errors.New("injected failure")
	_, _ = s.Sync(context.Background(), withHealth(realisticState(), "node-b", false))
	ct.err = nil
	mustSync(t, s, realisticState())
	if len(ct.deleted) != 1 {
		t.Errorf("flows in use again were deleted: %v", ct.deleted)
	}
}

func TestCleanupRemovesOurTables(t *testing.T) {
	s, v4, v6, _ := newFakeSyncer()
	mustSync(t, s, realisticState())
	if err := s.Cleanup(context.Background()); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	if v4.Table != nil || v6.Table != nil {
		t.Errorf("tables left after Cleanup:\n%s%s", v4.Dump(), v6.Dump())
	}
	if err := s.Cleanup(context.Background()); err != nil {
		t.Errorf("Cleanup without tables: %v", err)
	}
	mustSync(t, s, realisticState())
	if got, want := dump(v4, v6), freshDump(t, realisticState()); got != want {
		t.Errorf("sync after Cleanup is incomplete:\n%s", cmp.Diff(want, got))
	}
}

func TestSingleStackSyncer(t *testing.T) {
	v4 := knftables.NewFake(knftables.IPv4Family, TableName)
	s := NewSyncer(v4, nil, nil, nil)
	mustSync(t, s, realisticState())
	mustSync(t, s, withHealth(realisticState(), "node-b", false))
	if strings.Contains(v4.Dump(), "2001:db8") {
		t.Errorf("IPv6 addresses in the IPv4 table")
	}
}

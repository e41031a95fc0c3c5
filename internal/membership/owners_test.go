package membership

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func vips(n int) []netip.Addr {
	var out []netip.Addr
	a := netip.MustParseAddr("192.0.2.200")
	for range n {
		out = append(out, a)
		a = a.Next()
	}
	return out
}

func without(members []string, gone string) []string {
	return slices.DeleteFunc(slices.Clone(members), func(m string) bool { return m == gone })
}

// TestOwnersGolden pins the hash: every agent sharing the addresses must compute the
// same owners, also across versions during a rolling upgrade. A change here
// moves addresses when hosts run different versions; don't.
func TestOwnersGolden(t *testing.T) {
	got := Owners([]netip.Addr{
		netip.MustParseAddr("192.0.2.200"), netip.MustParseAddr("192.0.2.201"),
		netip.MustParseAddr("192.0.2.202"), netip.MustParseAddr("2001:db8::c8"),
	}, []string{"lb-1", "lb-2", "lb-3"})
	want := map[netip.Addr]string{
		netip.MustParseAddr("192.0.2.200"):  "lb-3",
		netip.MustParseAddr("192.0.2.201"):  "lb-3",
		netip.MustParseAddr("192.0.2.202"):  "lb-2",
		netip.MustParseAddr("2001:db8::c8"): "lb-3",
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("Owners (-want +got):\n%s", diff)
	}
}

func TestOwners(t *testing.T) {
	three := []string{"lb-1", "lb-2", "lb-3"}
	all := vips(60)
	tests := []struct {
		name          string
		before, after []string
		// moved returns whether an address may move from old to new owner.
		mayMove func(old, new string) bool
	}{
		{
			name: "a member leaves: only its addresses move", before: three, after: without(three, "lb-2"),
			mayMove: func(old, _ string) bool { return old == "lb-2" },
		},
		{
			name: "a member returns: only its own share moves, to it", before: without(three, "lb-2"), after: three,
			mayMove: func(_, new string) bool { return new == "lb-2" },
		},
		{
			name: "order of members does not matter", before: three, after: []string{"lb-3", "lb-1", "lb-2"},
			mayMove: func(string, string) bool { return false },
		},
		{
			name: "two of five leave: only theirs move", before: []string{"a", "b", "c", "d", "e"}, after: []string{"a", "c", "e"},
			mayMove: func(old, _ string) bool { return old == "b" || old == "d" },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, after := Owners(all, tt.before), Owners(all, tt.after)
			moved := 0
			for _, v := range all {
				if before[v] == after[v] {
					continue
				}
				moved++
				if !tt.mayMove(before[v], after[v]) {
					t.Errorf("%s moved from %s to %s", v, before[v], after[v])
				}
				if !slices.Contains(tt.after, after[v]) {
					t.Errorf("%s went to %s, not a member", v, after[v])
				}
			}
			t.Logf("%d of %d addresses moved", moved, len(all))
		})
	}
}

func TestOwnersSpread(t *testing.T) {
	members := []string{"lb-1", "lb-2", "lb-3"}
	count := map[string]int{}
	for _, o := range Owners(vips(300), members) {
		count[o]++
	}
	for _, m := range members {
		// 100 expected each; a fair hash stays well within 60..140.
		if count[m] < 60 || count[m] > 140 {
			t.Errorf("spread over %v: %v, want about 100 each", members, count)
		}
	}
}

func TestOwnerPairwise(t *testing.T) {
	// The owner among a set wins against every other member in a pair: the
	// split-brain tie-break (conflict.go) relies on it.
	members := []string{"lb-1", "lb-2", "lb-3", "lb-4"}
	for _, v := range vips(50) {
		o := Owner(v, members)
		for _, m := range members {
			if m != o && Owner(v, []string{m, o}) != o {
				t.Errorf("%s: owner %s of %v loses against %s", v, o, members, m)
			}
		}
	}
}

func TestOwnersEdges(t *testing.T) {
	if got := Owners(vips(3), nil); len(got) != 0 {
		t.Errorf("no members: %v, want none", got)
	}
	if got := Owner(netip.MustParseAddr("::ffff:192.0.2.200"), []string{"a", "b"}); got != Owner(netip.MustParseAddr("192.0.2.200"), []string{"a", "b"}) {
		t.Error("a v4-mapped address has another owner than the plain one")
	}
	for i := range 5 {
		m := fmt.Sprintf("only-%d", i)
		for v, o := range Owners(vips(5), []string{m}) {
			if o != m {
				t.Errorf("%s owned by %s, want the lone %s", v, o, m)
			}
		}
	}
}

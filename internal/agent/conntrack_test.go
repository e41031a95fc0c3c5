package agent

import (
	"context"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type fakeForgetter struct{ calls [][]netip.Addr }

func (f *fakeForgetter) Forget(_ context.Context, vips []netip.Addr) error {
	f.calls = append(f.calls, vips)
	return nil
}

func TestForgetGained(t *testing.T) {
	v1, v2, v3 := netip.MustParseAddr("192.0.2.200"), netip.MustParseAddr("192.0.2.201"), netip.MustParseAddr("2001:db8::c8")
	f := &fakeForgetter{}
	a := &Agent{cfg: Config{Conntrack: f}}
	ctx := context.Background()
	a.forgetGained(ctx, []netip.Addr{v1, v3}) // first sync: everything is gained
	a.forgetGained(ctx, []netip.Addr{v1, v3}) // nothing new
	a.forgetGained(ctx, []netip.Addr{v3})     // v1 given away
	a.forgetGained(ctx, []netip.Addr{v1, v2, v3})
	want := [][]netip.Addr{{v1, v3}, {v1, v2}}
	if diff := cmp.Diff(want, f.calls, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("Forget calls (-want +got):\n%s", diff)
	}
	(&Agent{}).forgetGained(ctx, []netip.Addr{v1}) // no Forgetter: nothing to do
}

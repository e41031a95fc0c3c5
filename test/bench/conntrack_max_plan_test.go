package bench

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestConntrackMaxPlan(t *testing.T) {
	const gib = 1 << 30
	tests := []struct {
		name         string
		limit        int
		memAvailable uint64
		want         int
		whyHas       string
	}{
		{name: "raised when memory allows", limit: 262_144, memAvailable: 20 * gib, want: 1_012_144},
		{name: "just enough memory", limit: 262_144, memAvailable: 2*1_000_000*conntrackEntryBytes + gib, want: 1_012_144},
		{name: "too little memory", limit: 262_144, memAvailable: 2*1_000_000*conntrackEntryBytes + gib - 1, whyHas: "MemAvailable is 1691 MiB, less than the 1691 MiB"},
		{name: "large enough already", limit: 2_000_000, memAvailable: 20 * gib, whyHas: "is 2000000 already"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, why := conntrackMaxPlan(tt.limit, 1_000_000, 2, tt.memAvailable)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("target (-want +got):\n%s", diff)
			}
			if !strings.Contains(why, tt.whyHas) || (tt.whyHas == "") != (why == "") {
				t.Errorf("why = %q, want it to contain %q", why, tt.whyHas)
			}
		})
	}
}

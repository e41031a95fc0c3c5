package bench

import (
	"os"
	"testing"
)

// Every benchmark runs on the real cluster (test/framework/realcluster), which
// builds groundcloud's images itself.

func skipUnlessBench(t *testing.T) {
	t.Helper()
	if os.Getenv("GROUNDCLOUD_BENCH") == "" || testing.Short() {
		t.Skip("benchmark: run with make bench (GROUNDCLOUD_BENCH=1)")
	}
}

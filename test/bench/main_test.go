package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/groundcloud/groundcloud/internal/sandbox"
)

// Our binaries, built once by TestMain when benchmarks run.
var ccmBinary, agentBinary, nodesimBinary string

func TestMain(m *testing.M) {
	flag.Parse()
	if os.Getenv("GROUNDCLOUD_BENCH") == "" || testing.Short() {
		os.Exit(m.Run()) // each benchmark skips
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "groundcloud-bench-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	bins, err := sandbox.BuildBinaries(context.Background(), dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ccmBinary, agentBinary, nodesimBinary = bins.ControllerManager, bins.Agent, bins.NodeSim
	return m.Run()
}

func skipUnlessBench(t *testing.T) {
	t.Helper()
	if os.Getenv("GROUNDCLOUD_BENCH") == "" || testing.Short() {
		t.Skip("benchmark: run with make bench (GROUNDCLOUD_BENCH=1)")
	}
}

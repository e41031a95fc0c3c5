package bench

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/groundcloud/groundcloud/internal/testbed"
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
	root, err := testbed.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	build := exec.Command("go", "build", "-o", dir+"/", "./cmd/...")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build groundcloud binaries: %v\n%s", err, out)
		return 1
	}
	ccmBinary = filepath.Join(dir, "groundcloud-controller-manager")
	agentBinary = filepath.Join(dir, "groundcloud-agent")
	nodesimBinary = filepath.Join(dir, "groundcloud-nodesim")
	return m.Run()
}

func skipUnlessBench(t *testing.T) {
	t.Helper()
	if os.Getenv("GROUNDCLOUD_BENCH") == "" || testing.Short() {
		t.Skip("benchmark: run with make bench (GROUNDCLOUD_BENCH=1)")
	}
}

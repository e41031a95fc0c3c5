package realcluster

import (
	"os"
	"testing"

	"github.com/groundcloud/groundcloud/test/framework/controlplane"
)

// StartT starts a cluster for a test and closes it in t.Cleanup, logging
// the tails of the logs when the test failed. It builds the tools if
// opts.ToolsDir is empty and uses a temporary Dir if none is given. Skipped
// with -short and when not root.
func StartT(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("cluster: starts a real cluster; skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("cluster: nodes are network namespaces and need root")
	}
	if opts.ToolsDir == "" {
		dir, err := controlplane.ToolsDir(t.Context())
		if err != nil {
			t.Fatalf("cluster: tools: %v", err)
		}
		opts.ToolsDir = dir
	}
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	c, err := Start(t.Context(), opts)
	if err != nil {
		t.Fatalf("cluster: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, log := range c.Logs() {
				t.Logf("cluster: tail of %s:\n%s", log, controlplane.LogTail(log, 30))
			}
		}
		if err := c.Close(); err != nil {
			t.Errorf("cluster: close: %v", err)
		}
	})
	return c
}

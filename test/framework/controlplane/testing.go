package controlplane

import (
	"testing"
)

// StartT starts a control plane for a test and stops it in t.Cleanup. It
// builds the tools if Options.BinDir is empty, fails the test if anything
// goes wrong (it never skips because a tool is missing), and logs the tail
// of each component's log when the test failed. Tests are skipped with
// -short.
func StartT(t testing.TB, opts Options) *ControlPlane {
	t.Helper()
	if testing.Short() {
		t.Skip("testbed: starts a real control plane; skipped with -short")
	}
	if opts.BinDir == "" {
		dir, err := ToolsDir(t.Context())
		if err != nil {
			t.Fatalf("testbed: tools: %v", err)
		}
		opts.BinDir = dir
	}
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	cp, err := Start(t.Context(), opts)
	if err != nil {
		t.Fatalf("testbed: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, log := range cp.Logs() {
				t.Logf("testbed: tail of %s:\n%s", log, LogTail(log, 40))
			}
		}
		if err := cp.Stop(); err != nil {
			t.Errorf("testbed: stop: %v", err)
		}
	})
	return cp
}

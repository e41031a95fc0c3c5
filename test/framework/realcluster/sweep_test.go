package realcluster

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"
)

// A sweep while another cluster holds the machine-wide lock leaves the
// kubelets' settings to that cluster and says so, rather than restoring
// them under it or quietly not at all.
func TestSweepSaysSettingsAreKeptWhileAnotherClusterRuns(t *testing.T) {
	if testing.Short() || os.Geteuid() != 0 {
		t.Skip("needs root and the machine-wide lock")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	l, err := LockHost(ctx, "TestSweepSaysSettingsAreKeptWhileAnotherClusterRuns")
	if err != nil {
		t.Skipf("another test bed holds the machine-wide lock: %v", err)
	}
	defer l.Unlock()
	err = Sweep("gcsweeptest")
	if !errors.Is(err, ErrSettingsKept) {
		t.Errorf("Sweep with the lock held elsewhere: %v, want ErrSettingsKept", err)
	}
}

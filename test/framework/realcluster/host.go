package realcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// globalSysctls are the machine-wide settings that a kubelet changes
// (pkg/kubelet/cm setupKernelTunables, unless protectKernelDefaults): they
// are not namespaced, so the kubelets in the nodes change the machine's.
// The test bed writes down their values before its first kubelet and puts
// them back when it stops.
var globalSysctls = []string{
	"vm.overcommit_memory",
	"vm.panic_on_oom",
	"kernel.panic",
	"kernel.panic_on_oops",
	"kernel.keys.root_maxkeys",
	"kernel.keys.root_maxbytes",
}

// Machine-wide files of the test bed: one real cluster runs at a time
// (its kubelets change global settings), and the settings it found are
// kept beside the lock until they are put back, so that a run after a
// crash restores the original values, not the crashed run's.
var (
	lockPath       = "/run/groundcloud-cluster.lock"
	clusterSysctls = SysctlRecord{Path: "/run/groundcloud-cluster.sysctls.json"}
)

// HostLock is the machine-wide lock of whoever changes the machine's
// global settings: a running test-bed cluster, or a benchmark that raises
// a global limit for a while. Holding it, one is sure that no cluster
// records the machine's state or settings in the meantime.
type HostLock struct{ f *os.File }

// LockHost takes the machine-wide lock, waiting while another holds it
// (until ctx is done), and records what it holds the lock for (owner).
func LockHost(ctx context.Context, owner string) (*HostLock, error) {
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", lockPath, err)
		}
		select {
		case <-ctx.Done():
			holder, _ := os.ReadFile(lockPath)
			f.Close()
			return nil, fmt.Errorf("another test bed holds the machine-wide lock (%s): %w", strings.TrimSpace(string(holder)), ctx.Err())
		case <-tick.C:
		}
	}
	_ = f.Truncate(0)
	_, _ = fmt.Fprintf(f, "pid %d, %s\n", os.Getpid(), owner)
	return &HostLock{f: f}, nil
}

// Unlock releases the lock.
func (l *HostLock) Unlock() {
	_ = l.f.Truncate(0)
	_ = unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
	l.f.Close()
}

package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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
	lockPath    = "/run/groundcloud-cluster.lock"
	sysctlsPath = "/run/groundcloud-cluster.sysctls.json"
)

// hostLock is the machine-wide lock of the running cluster.
type hostLock struct{ f *os.File }

// lockHost takes the machine-wide lock, waiting while another cluster
// holds it (until ctx is done), and records what it holds the lock for.
func lockHost(ctx context.Context, owner string) (*hostLock, error) {
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
			return nil, fmt.Errorf("another test-bed cluster runs on this machine (%s): %w", strings.TrimSpace(string(holder)), ctx.Err())
		case <-tick.C:
		}
	}
	_ = f.Truncate(0)
	_, _ = fmt.Fprintf(f, "pid %d, %s\n", os.Getpid(), owner)
	return &hostLock{f: f}, nil
}

func (l *hostLock) unlock() {
	_ = l.f.Truncate(0)
	_ = unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
	l.f.Close()
}

// saveSysctls records the values of globalSysctls, unless a crashed run
// left its record (those are the machine's own values); the lock is held.
func saveSysctls() error {
	if _, err := os.Stat(sysctlsPath); err == nil {
		return nil
	}
	values := map[string]string{}
	for _, key := range globalSysctls {
		v, err := readSysctl(key)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		values[key] = v
	}
	data, err := json.Marshal(values)
	if err != nil {
		return err
	}
	return os.WriteFile(sysctlsPath, data, 0o644)
}

// RestoreSysctls puts back the machine-wide settings a test-bed cluster
// found, if a record of them is there, and removes the record. Close calls
// it; so does whoever cleans up after a crashed cluster (the sandbox's
// down). The caller must hold the lock or know that no cluster runs.
func RestoreSysctls() error {
	data, err := os.ReadFile(sysctlsPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var values map[string]string
	if err := json.Unmarshal(data, &values); err != nil {
		return fmt.Errorf("read %s: %w", sysctlsPath, err)
	}
	var errs []error
	for key, v := range values {
		if cur, err := readSysctl(key); err == nil && cur == v {
			continue
		}
		if err := os.WriteFile(sysctlPath(key), []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore %s=%s: %w", key, v, err))
		}
	}
	if len(errs) == 0 {
		errs = append(errs, os.Remove(sysctlsPath))
	}
	return errors.Join(errs...)
}

func readSysctl(key string) (string, error) {
	data, err := os.ReadFile(sysctlPath(key))
	return strings.TrimSpace(string(data)), err
}

func sysctlPath(key string) string {
	return filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/"))
}

package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/groundcloud/groundcloud/test/framework/netlab"
	"github.com/groundcloud/groundcloud/test/framework/realcluster"
)

// Down removes the sandbox: it asks a running one to stop and waits for
// it, then removes whatever a crashed one left (with state in dir).
func Down(dir string, out io.Writer) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("run as root")
	}
	if pid, holderDir, running := runningSandbox(); running {
		dir = holderDir
		fmt.Fprintf(out, "==> stopping the running sandbox (pid %d)\n", pid)
		_ = syscall.Kill(pid, syscall.SIGTERM)
		deadline := time.Now().Add(60 * time.Second)
		for processAlive(pid) {
			if time.Now().After(deadline) {
				fmt.Fprintf(out, "==> pid %d did not stop in 60s; killing it\n", pid)
				_ = syscall.Kill(pid, syscall.SIGKILL)
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	if n := killProcessesNaming(filepath.Join(dir, "run")); n > 0 {
		fmt.Fprintf(out, "==> stopped %d leftover process(es)\n", n)
	}
	if err := sweep(dir); err != nil {
		return err
	}
	fmt.Fprintln(out, "==> no sandbox is left")
	return nil
}

// runningSandbox is the pid and state directory of the `up` holding the
// lock, if one does.
func runningSandbox() (int, string, bool) {
	f, err := os.OpenFile(lockPath, os.O_RDWR, 0)
	if err != nil {
		return 0, "", false
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err == nil {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		return 0, "", false
	}
	pid, dir := lockHolder()
	return pid, dir, pid > 0
}

func processAlive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// sweep removes what a sandbox may have left: processes whose command line
// names dir's work directory (the control plane, kubelets, containerd and
// its shims), the nodes with the sandbox's prefix and their Pods, the link
// into them, the router's directory (--bgp) and the work directory. Only the lock holder, or Down when nobody holds it, calls it.
func sweep(dir string) error {
	killProcessesNaming(filepath.Join(dir, "run"))
	// The nodes' namespaces and processes, their Pods' processes and
	// cgroups, and the machine-wide settings their kubelets changed.
	// Settings another cluster still needs are left (and reported); the
	// rest is removed all the same.
	kept := realcluster.Sweep(labPrefix)
	if kept != nil && !errors.Is(kept, realcluster.ErrSettingsKept) {
		return kept
	}
	if err := netlab.UnlinkRoot(rootLink); err != nil {
		return err
	}
	if err := sweepRouter(dir); err != nil {
		return err
	}
	return errors.Join(os.RemoveAll(filepath.Join(dir, "run")), kept)
}

// killProcessesNaming SIGKILLs every process (not this one) whose command
// line contains path, and returns how many there were.
func killProcessesNaming(path string) int {
	entries, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(path)) {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}

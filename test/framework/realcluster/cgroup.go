package realcluster

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupHierarchies lists the mount points of this machine's cgroup
// hierarchies (v1 controllers, name=systemd, the v2 unified one).
func cgroupHierarchies() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var dirs []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "36 25 0:31 / /sys/fs/cgroup/cpu rw,... - cgroup cgroup rw,cpu"
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, fsFields := strings.Fields(pre), strings.Fields(post)
		if ok && len(fields) >= 5 && len(fsFields) >= 1 && (fsFields[0] == "cgroup" || fsFields[0] == "cgroup2") {
			dirs = append(dirs, fields[4])
		}
	}
	return dirs, sc.Err()
}

// createCgroup makes the cgroup path (e.g. "/groundcloud.x/node-1") in
// every hierarchy: the kubelet requires its --cgroup-root to exist. A new
// cpuset cgroup gets its parent's CPUs and memory nodes, or nothing could
// run in it.
func createCgroup(path string) error {
	dirs, err := cgroupHierarchies()
	if err != nil {
		return fmt.Errorf("create cgroup %s: %w", path, err)
	}
	for _, h := range dirs {
		parts := strings.Split(strings.Trim(path, "/"), "/")
		cur := h
		for _, part := range parts {
			parent := cur
			cur = filepath.Join(cur, part)
			if err := os.Mkdir(cur, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("create cgroup %s: %w", cur, err)
			}
			if err := inheritCpuset(parent, cur); err != nil {
				return err
			}
		}
	}
	return nil
}

func inheritCpuset(parent, child string) error {
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		v, err := os.ReadFile(filepath.Join(parent, f))
		if errors.Is(err, fs.ErrNotExist) {
			return nil // not the cpuset hierarchy
		}
		if err != nil {
			return err
		}
		cur, _ := os.ReadFile(filepath.Join(child, f))
		if strings.TrimSpace(string(cur)) != "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(child, f), v, 0o644); err != nil {
			return fmt.Errorf("cgroup %s: %s: %w", child, f, err)
		}
	}
	return nil
}

// controlPlaneCgroup is the cgroup of the control plane's processes, a
// sibling of the nodes' (cgroupRoot, "/groundcloud.<prefix>/<node>").
// Left among the machine's own processes, a restarting kube-apiserver's
// dozens of busy threads would each weigh as much as all the nodes
// together: every agent of the cluster then waits for the CPU at once
// (seen: a 100 ms sampling loop stretched to 885 ms while the apiserver
// started), which on separate machines cannot happen, and their
// sub-second failure detection declares each other failed. Beside the
// nodes it weighs as one more machine.
func controlPlaneCgroup(prefix string) string { return "/groundcloud." + prefix + "/control-plane" }

// setCPUWeight gives the cgroup path the CPU weight of machines
// machines, each weighing as one busy process of the host (cpu.shares
// 1024 under cgroup v1, cpu.weight 100 under v2), so that the cluster as a
// whole is not starved by the host's other processes any more than its
// machines would be.
func setCPUWeight(path string, machines int) error {
	dirs, err := cgroupHierarchies()
	if err != nil {
		return fmt.Errorf("cgroup %s: %w", path, err)
	}
	for _, h := range dirs {
		for file, per := range map[string]int{"cpu.shares": 1024, "cpu.weight": 100} {
			f := filepath.Join(h, path, file)
			if _, err := os.Stat(f); err != nil {
				continue
			}
			if err := os.WriteFile(f, []byte(strconv.Itoa(min(per*machines, 10000))), 0o644); err != nil {
				return fmt.Errorf("cgroup %s: %w", path, err)
			}
		}
	}
	return nil
}

// joinCPUCgroup moves process pid (all its threads) into the cgroup path of
// the CPU controller's hierarchies only: its memory and other accounting
// stay where the caller's are.
func joinCPUCgroup(path string, pid int) error {
	dirs, err := cgroupHierarchies()
	if err != nil {
		return fmt.Errorf("join cgroup %s: %w", path, err)
	}
	joined := false
	for _, h := range dirs {
		if _, err := os.Stat(filepath.Join(h, "cpu.shares")); err != nil {
			continue // not the v1 CPU controller's hierarchy
		}
		if err := os.WriteFile(filepath.Join(h, path, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("join cgroup %s: %w", path, err)
		}
		joined = true
	}
	if !joined {
		// cgroup v2 only: the unified hierarchy has cpu.weight; its
		// cgroup.procs moves the process for every controller alike.
		for _, h := range dirs {
			if _, err := os.Stat(filepath.Join(h, "cgroup.controllers")); err != nil {
				continue
			}
			if err := os.WriteFile(filepath.Join(h, path, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
				return fmt.Errorf("join cgroup %s: %w", path, err)
			}
		}
	}
	return nil
}

// killCgroup kills every process in the cgroup path and below, in every
// hierarchy, until none is left (a dying process's children may join
// late), then removes the cgroups.
func killCgroup(path string) error {
	dirs, err := cgroupHierarchies()
	if err != nil {
		return fmt.Errorf("kill cgroup %s: %w", path, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		pids := cgroupPids(dirs, path)
		if len(pids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kill cgroup %s: processes %v are still there after 30 s", path, pids)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return removeCgroup(dirs, path)
}

// cgroupPids lists the processes in path and below, over all hierarchies.
func cgroupPids(hierarchies []string, path string) []int {
	var pids []int
	for _, h := range hierarchies {
		_ = filepath.WalkDir(filepath.Join(h, path), func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			data, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil && !slices.Contains(pids, pid) {
					pids = append(pids, pid)
				}
			}
			return nil
		})
	}
	return pids
}

// removeCgroup removes path and everything below it, deepest first, and
// the parents of path it leaves empty up to the hierarchy's root.
func removeCgroup(hierarchies []string, path string) error {
	var errs []error
	for _, h := range hierarchies {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(h, path), func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for _, d := range slices.Backward(dirs) {
			if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
			}
		}
		for parent := filepath.Dir(filepath.Join(h, path)); parent != h && strings.HasPrefix(parent, h); parent = filepath.Dir(parent) {
			if os.Remove(parent) != nil {
				break // not empty: another node's, or not ours
			}
		}
	}
	return errors.Join(errs...)
}

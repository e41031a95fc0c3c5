// Package memlimit gives the Go runtime a soft memory limit below the
// container's: a process that would otherwise grow its heap to twice the
// live data (GOGC=100) collects harder as it nears the cgroup's limit
// instead of being killed by the kernel.
//
// It applies only when GOMEMLIMIT is not set (an explicit setting always
// wins) and the process runs in a cgroup v2 with a memory limit
// (memory.max not "max"). The limit it sets is Fraction of the cgroup's.
package memlimit

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"

	"k8s.io/klog/v2"
)

// Fraction of the cgroup's memory limit given to the Go runtime: the rest
// is for memory the runtime does not count (thread stacks outside the heap
// accounting, the binary's text, page cache charged to the cgroup).
const Fraction = 0.9

// Set applies the limit and returns it in bytes (0: none applied, and
// why, when err is nil and nothing applies; an error only for a cgroup file
// that exists but cannot be read).
func Set() (int64, error) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0, nil
	}
	limit, err := cgroupLimit("/proc/self/cgroup", "/sys/fs/cgroup")
	if err != nil || limit <= 0 {
		return 0, err
	}
	soft := int64(float64(limit) * Fraction)
	debug.SetMemoryLimit(soft)
	return soft, nil
}

// cgroupLimit reads the memory.max of this process's cgroup v2 (0: no
// limit, or not cgroup v2).
func cgroupLimit(self, root string) (int64, error) {
	data, err := os.ReadFile(self)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, nil
		}
		return 0, err
	}
	path, ok := unifiedPath(string(data))
	if !ok {
		return 0, nil
	}
	raw, err := os.ReadFile(filepath.Join(root, path, "memory.max"))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, nil
		}
		return 0, err
	}
	return parseMax(string(raw))
}

// unifiedPath returns the cgroup v2 path of a /proc/self/cgroup ("0::/a/b").
func unifiedPath(s string) (string, bool) {
	for line := range strings.SplitSeq(s, "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return filepath.Clean("/" + p), true
		}
	}
	return "", false
}

// parseMax reads memory.max: bytes, or "max" for none.
func parseMax(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "max" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n == math.MaxInt64 {
		return 0, fmt.Errorf("memory.max %q: not a limit in bytes", s)
	}
	return n, nil
}

// Apply is Set with the outcome logged.
func Apply(logger klog.Logger) {
	soft, err := Set()
	switch {
	case err != nil:
		logger.Error(err, "Cannot read the container's memory limit; the Go runtime has none")
	case soft > 0:
		logger.Info("Go runtime memory limit set from the container's", "bytes", soft, "fraction", Fraction)
	}
}

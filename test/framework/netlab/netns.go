package netlab

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// netnsDir holds the bind mounts that name namespaces, as `ip netns` does.
const netnsDir = "/run/netns"

// DefaultFamily is the family of the prefixes New and NewT make when
// Options.Prefix is empty.
const DefaultFamily = "gclab"

var (
	familyRE = regexp.MustCompile(`^[a-z]{1,16}$`)
	prefixRE = regexp.MustCompile(`^[a-z0-9]{1,32}$`)
	hostRE   = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$`)
)

// RunPrefix returns a lab prefix unique to this run: family, this process's
// pid, "x" and a random number, e.g. "gclab4711x03fa". SweepStale(family)
// recognises it once the process is gone. family is lower-case letters.
func RunPrefix(family string) string {
	return fmt.Sprintf("%s%dx%04x", family, os.Getpid(), rand.N(0x10000))
}

// Sweep kills the processes inside, and deletes, every namespace named
// "<prefix>-*": the leftovers of a lab with that exact prefix, such as a
// sandbox that died without Close. It must not be given the prefix of a lab
// still in use.
func Sweep(prefix string) error {
	if !prefixRE.MatchString(prefix) {
		return fmt.Errorf("sweep: invalid prefix %q", prefix)
	}
	names, err := namespaces()
	if err != nil {
		return fmt.Errorf("sweep %s: %w", prefix, err)
	}
	var errs []error
	for _, name := range names {
		if strings.HasPrefix(name, prefix+"-") {
			errs = append(errs, removeNamespace(name))
		}
	}
	return errors.Join(errs...)
}

// SweepStale deletes the namespaces of labs whose prefix RunPrefix(family)
// made in a process that no longer exists. Labs of live processes, this
// one's included, are left alone.
func SweepStale(family string) error {
	if !familyRE.MatchString(family) {
		return fmt.Errorf("sweep stale: invalid family %q", family)
	}
	names, err := namespaces()
	if err != nil {
		return fmt.Errorf("sweep stale %s: %w", family, err)
	}
	var errs []error
	for _, name := range names {
		pid, ok := runPID(family, name)
		if ok && pid != os.Getpid() && !processExists(pid) {
			errs = append(errs, removeNamespace(name))
		}
	}
	return errors.Join(errs...)
}

// runPID parses "<family><pid>x<hex>-<host>".
func runPID(family, name string) (int, bool) {
	prefix, _, ok := strings.Cut(name, "-")
	rest, found := strings.CutPrefix(prefix, family)
	if !ok || !found {
		return 0, false
	}
	digits, _, ok := strings.Cut(rest, "x")
	pid, err := strconv.Atoi(digits)
	if !ok || err != nil || pid <= 0 || digits[0] == '+' {
		return 0, false
	}
	return pid, true
}

func processExists(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// namespaces lists the named namespaces.
func namespaces() ([]string, error) {
	entries, err := os.ReadDir(netnsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names, nil
}

// createNamespace creates and names a new, empty namespace, without moving
// the calling thread (or any thread that outlives the call) into it.
func createNamespace(name string) (netns.NsHandle, error) {
	if err := prepareNetnsDir(); err != nil {
		return netns.None(), fmt.Errorf("create namespace %s: %w", name, err)
	}
	handle := netns.None()
	err := onThread(func() error {
		var err error
		handle, err = netns.NewNamed(name) // switches this thread; onThread restores it
		if err != nil && !errors.Is(err, fs.ErrExist) {
			_ = os.Remove(filepath.Join(netnsDir, name)) // a failed mount leaves the file
		}
		return err
	})
	if err != nil {
		return netns.None(), fmt.Errorf("create namespace %s: %w", name, err)
	}
	return handle, nil
}

// prepareNetnsDir makes netnsDir a shared mount point, a bind mount of
// itself, as `ip netns add` does before naming a namespace. Without it,
// the first `ip netns add` run on the machine while a lab exists binds the
// directory over itself and hides the lab's names under it: they can no
// longer be unmounted or removed ("device or resource busy"), and the lab
// leaks its namespaces. Like ip, it leaves the mount point in place.
func prepareNetnsDir() error {
	if err := os.MkdirAll(netnsDir, 0o755); err != nil {
		return err
	}
	err := unix.Mount("", netnsDir, "none", unix.MS_SHARED|unix.MS_REC, "")
	if !errors.Is(err, unix.EINVAL) {
		return err // nil: a mount point already
	}
	if err := unix.Mount(netnsDir, netnsDir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s over itself: %w", netnsDir, err)
	}
	return unix.Mount("", netnsDir, "none", unix.MS_SHARED|unix.MS_REC, "")
}

// removeNamespace kills the processes in a named namespace and deletes its
// name; the kernel frees the namespace once nothing refers to it. A
// namespace that is already gone is not an error.
func removeNamespace(name string) error {
	if err := killProcessesIn(name); err != nil {
		return fmt.Errorf("delete namespace %s: %w", name, err)
	}
	path := filepath.Join(netnsDir, name)
	err := unix.Unmount(path, unix.MNT_DETACH)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil
	case err != nil && !errors.Is(err, unix.EINVAL): // EINVAL: not mounted; remove the file anyway
		return fmt.Errorf("delete namespace %s: %w", name, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete namespace %s: %w", name, err)
	}
	return nil
}

// killProcessesIn sends SIGKILL to every process whose network namespace is
// the named one (what `ip netns pids` finds).
func killProcessesIn(name string) error {
	var ns unix.Stat_t
	if err := unix.Stat(filepath.Join(netnsDir, name), &ns); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(filepath.Join("/proc", p.Name(), "ns/net"), &st) == nil && st.Dev == ns.Dev && st.Ino == ns.Ino {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return nil
}

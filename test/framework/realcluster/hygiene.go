package realcluster

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// HostState is what a test bed must leave as it found it on the machine:
// the root network namespace's links, addresses, routes and ruleset, the
// sysctls, and the mounts (other than the named network namespaces of
// other runs, which come and go with them).
type HostState map[string][]string

// volatileSysctls change by themselves; they say nothing of a test bed.
var volatileSysctls = []string{
	"fs.dentry-state", "fs.file-nr", "fs.inode-nr", "fs.inode-state", "fs.aio-nr",
	"fs.quota.", "fs.binfmt_misc.", "kernel.random.", "kernel.ns_last_pid", "kernel.pty.nr",
	"net.netfilter.nf_conntrack_count", "kernel.perf_event_max_sample_rate",
	"kernel.unprivileged_userns_apparmor_policy", "net.ipv4.tcp_fastopen_key",
}

// TakeHostState reads the machine's state. mine filters the named network
// namespaces: those for which it returns false are left out (a shared
// machine has other runs' labs).
func TakeHostState(ctx context.Context, mine func(netns string) bool) (HostState, error) {
	s := HostState{}
	var err error
	if s["links"], s["addresses"], s["routes"], err = rootNetwork(); err != nil {
		return nil, err
	}
	out, err := exec.CommandContext(ctx, "nft", "list", "ruleset").Output()
	if err != nil {
		return nil, fmt.Errorf("nft list ruleset: %w", err)
	}
	s["ruleset"] = strings.Split(strings.TrimSpace(string(out)), "\n")
	if s["sysctls"], err = sysctls(); err != nil {
		return nil, err
	}
	if s["mounts"], err = mounts(mine); err != nil {
		return nil, err
	}
	return s, nil
}

// Diff lists what differs between s (before) and after, kind by kind.
func (s HostState) Diff(after HostState) []string {
	var diffs []string
	for _, kind := range slices.Sorted(maps.Keys(s)) {
		gone, added := difference(s[kind], after[kind]), difference(after[kind], s[kind])
		for _, g := range gone {
			diffs = append(diffs, fmt.Sprintf("%s: gone: %s", kind, g))
		}
		for _, a := range added {
			diffs = append(diffs, fmt.Sprintf("%s: added: %s", kind, a))
		}
	}
	return diffs
}

// difference is a minus b, as multisets.
func difference(a, b []string) []string {
	count := map[string]int{}
	for _, x := range b {
		count[x]++
	}
	var out []string
	for _, x := range a {
		if count[x] > 0 {
			count[x]--
			continue
		}
		out = append(out, x)
	}
	return out
}

// rootNetwork lists the root namespace's links, addresses and routes (all
// tables, both families), one line each, without counters.
func rootNetwork() (links, addrs, routes []string, err error) {
	ls, err := netlink.LinkList()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("list links: %w", err)
	}
	names := map[int]string{}
	for _, l := range ls {
		a := l.Attrs()
		names[a.Index] = a.Name
		links = append(links, fmt.Sprintf("%s %s %s", a.Name, l.Type(), a.HardwareAddr))
	}
	as, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("list addresses: %w", err)
	}
	for _, a := range as {
		addrs = append(addrs, fmt.Sprintf("%s %s", names[a.LinkIndex], a.IPNet))
	}
	rs, err := netlink.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("list routes: %w", err)
	}
	for _, r := range rs {
		routes = append(routes, fmt.Sprintf("table %d dst %v via %v dev %s src %v proto %d scope %d type %d metric %d",
			r.Table, r.Dst, r.Gw, names[r.LinkIndex], r.Src, r.Protocol, r.Scope, r.Type, r.Priority))
	}
	return links, addrs, routes, nil
}

// sysctls reads every readable sysctl of this (the root) namespace but the
// volatile ones, as "key = value".
func sysctls() ([]string, error) {
	var out []string
	err := filepath.WalkDir("/proc/sys", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		key := strings.ReplaceAll(strings.TrimPrefix(p, "/proc/sys/"), "/", ".")
		if slices.ContainsFunc(volatileSysctls, func(v string) bool { return key == v || (strings.HasSuffix(v, ".") && strings.HasPrefix(key, v)) }) {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil // write-only or refused: not state we can compare
		}
		out = append(out, key+" = "+strings.Join(strings.Fields(string(data)), " "))
		return nil
	})
	return out, err
}

// mounts lists this process's mounts as "mount point fstype source",
// leaving out named network namespaces that mine rejects.
func mounts(mine func(string) bool) ([]string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		pre, post, _ := strings.Cut(sc.Text(), " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 2 {
			continue
		}
		if ns, ok := strings.CutPrefix(f[4], "/run/netns/"); ok && !mine(ns) {
			continue
		}
		if f[4] == "/run/netns" {
			// The directory of named namespaces made a mount point by the
			// first lab or `ip netns add`, which leave it in place.
			continue
		}
		out = append(out, f[4]+" "+g[0]+" "+g[1])
	}
	return out, sc.Err()
}

// Leftovers lists what of the cluster is still on the machine after Close:
// processes whose command line names its directory, that are in its
// cgroups or in its nodes' network namespaces; its cgroups; its named
// namespaces.
func (c *Cluster) Leftovers() []string {
	var left []string
	cgroupPrefix := "/groundcloud." + c.Opts.Prefix
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		dir := filepath.Join("/proc", e.Name())
		cmdline, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		cgroups, _ := os.ReadFile(filepath.Join(dir, "cgroup"))
		netns, _ := os.Readlink(filepath.Join(dir, "ns", "net"))
		if bytes.Contains(cmdline, []byte(c.Opts.Dir)) || bytes.Contains(cgroups, []byte(cgroupPrefix)) || slices.Contains(c.nodeNetns, netns) {
			left = append(left, fmt.Sprintf("process %d: %s", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
		}
	}
	if dirs, err := cgroupHierarchies(); err == nil {
		for _, h := range dirs {
			if _, err := os.Stat(filepath.Join(h, cgroupPrefix)); err == nil {
				left = append(left, "cgroup "+filepath.Join(h, cgroupPrefix))
			}
		}
	}
	if names, err := os.ReadDir("/run/netns"); err == nil {
		for _, n := range names {
			if c.mine(n.Name()) {
				left = append(left, "namespace "+n.Name())
			}
		}
	}
	return left
}

// WithHostLock runs fn holding the machine-wide lock of the test-bed
// clusters, waiting for it while a cluster runs (until ctx is done): a
// test that starts a cluster in another process (the sandbox) reads the
// machine's state in it, when no cluster is changing it.
func WithHostLock(ctx context.Context, fn func() error) error {
	l, err := LockHost(ctx, "a check of the machine")
	if err != nil {
		return err
	}
	defer l.Unlock()
	return fn()
}

package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/groundcloud/groundcloud/test/framework/realcluster"
)

const (
	conntrackMaxKey = "net.netfilter.nf_conntrack_max"
	// conntrackRecord holds nf_conntrack_max as the benchmark found it,
	// while it is raised; a run that finds it restores that value first.
	conntrackRecord = "/run/groundcloud-bench.sysctls.json"
	// conntrackEntryBytes is what one entry costs the kernel, roughly: a
	// struct nf_conn (256 B in the nf_conntrack slab of Linux 6.18) and
	// its extensions.
	conntrackEntryBytes = 350
	// conntrackMemoryHeadroom is left to the rest of the machine on top
	// of the entries (a shared machine: other tests run on it).
	conntrackMemoryHeadroom = 1 << 30
)

// conntrackMaxPlan is what nf_conntrack_max should be raised to for hosts
// tables of wanted entries each, given the limit now and the machine's
// MemAvailable in bytes: 0 and why not when it should not be raised.
func conntrackMaxPlan(limit, wanted, hosts int, memAvailable uint64) (int, string) {
	target := wanted + conntrackHeadroom
	if limit >= target {
		return 0, fmt.Sprintf("%s is %d already, room for %d entries and the benchmark's own flows", conntrackMaxKey, limit, wanted)
	}
	need := uint64(hosts)*uint64(wanted)*conntrackEntryBytes + conntrackMemoryHeadroom
	if memAvailable < need {
		return 0, fmt.Sprintf("MemAvailable is %d MiB, less than the %d MiB that %d tables of %d entries (about %d B each) and %d MiB of headroom need",
			memAvailable>>20, need>>20, hosts, wanted, conntrackEntryBytes, conntrackMemoryHeadroom>>20)
	}
	return target, ""
}

// restoreConntrackMax puts back the nf_conntrack_max that a run which did
// not finish recorded in conntrackRecord, under the machine-wide lock of the
// test beds; call it before the cluster starts, which records the
// machine's settings to compare them when it ends.
func restoreConntrackMax(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Minute)
	defer cancel()
	must(t, realcluster.WithHostLock(ctx, func() error {
		rec := realcluster.SysctlRecord{Path: conntrackRecord}
		stale, err := rec.Restore()
		if err == nil && stale {
			v, _ := rec.Read(conntrackMaxKey)
			t.Logf("restored %s=%s from %s, left by a run that did not finish", conntrackMaxKey, v, conntrackRecord)
		}
		return err
	}))
}

// raiseConntrackMax raises the machine's nf_conntrack_max (global: the
// test hosts' namespaces cannot) so that each of hosts tables can hold
// wanted entries, until t ends, and says what it did. The caller holds the
// machine-wide lock of the test beds: the benchmark's running cluster
// does, so no other cluster test records or checks the machine's settings
// while the value is not the machine's own; t's cleanup runs before the
// cluster's, which compares them. The value it found is recorded in
// conntrackRecord first: t's cleanup puts it back and removes the record,
// even when t fails, and restoreConntrackMax of a run after one that
// crashed restores it. It raises nothing when the machine lacks the
// memory.
func raiseConntrackMax(t *testing.T, hosts, wanted int) string {
	t.Helper()
	rec := realcluster.SysctlRecord{Path: conntrackRecord}
	t.Cleanup(func() {
		found, err := rec.Restore()
		if err != nil {
			t.Errorf("put back %s: %v (the value the benchmark found is in %s)", conntrackMaxKey, err, conntrackRecord)
			return
		}
		if found {
			v, _ := rec.Read(conntrackMaxKey)
			t.Logf("put back %s=%s, removed %s", conntrackMaxKey, v, conntrackRecord)
		}
	})
	v, err := rec.Read(conntrackMaxKey)
	must(t, err)
	limit, err := strconv.Atoi(v)
	must(t, err)
	mem, err := memAvailable()
	must(t, err)
	target, why := conntrackMaxPlan(limit, wanted, hosts, mem)
	if target == 0 {
		why = "not raised: " + why
		t.Log(why)
		return why
	}
	_, err = rec.Save(conntrackMaxKey)
	must(t, err)
	must(t, rec.Write(conntrackMaxKey, strconv.Itoa(target)))
	did := fmt.Sprintf("raised by the benchmark from %d to %d for the run with full tables, recorded in %s and put back after it (MemAvailable was %d MiB)", limit, target, conntrackRecord, mem>>20)
	t.Log(did)
	return did
}

// memAvailable is the machine's MemAvailable in bytes.
func memAvailable() (uint64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemAvailable:" {
			kb, err := strconv.ParseUint(f[1], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no MemAvailable in /proc/meminfo")
}

// conntrackSlab is the number of entries in the machine's conntrack hash
// (one for all namespaces) as the nf_conntrack slab counts them, and the
// size of one.
func conntrackSlab() (objects, size int, err error) {
	b, err := os.ReadFile("/proc/slabinfo")
	if err != nil {
		return 0, 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 4 && f[0] == "nf_conntrack" {
			objects, err = strconv.Atoi(f[1])
			if err == nil {
				size, err = strconv.Atoi(f[3])
			}
			return objects, size, err
		}
	}
	return 0, 0, fmt.Errorf("no nf_conntrack slab in /proc/slabinfo")
}

func loadAverage() string {
	l, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(l)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], ", ")
	}
	return "unknown"
}

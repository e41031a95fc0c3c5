package bench

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/groundcloud/groundcloud/internal/dataplane"
	"github.com/groundcloud/groundcloud/test/framework/netlab"
	"github.com/groundcloud/groundcloud/test/framework/realcluster"
)

// conntrackWanted is the table size the issue asks to fail over with.
const conntrackWanted = 1_000_000

// conntrackHeadroom is left free below nf_conntrack_max for the
// benchmark's own flows: above it the kernel drops the entries of new
// flows (and says so in the host's log).
const conntrackHeadroom = 12_144

// conntrackQuarters is how many parts each host's fill is timed in, to
// show how inserting slows as the shared hash fills.
const conntrackQuarters = 4

// TestFailoverConntrackBenchmark measures, on the real cluster, the
// groundcloud link-down failover of TestFailoverBenchmark with the
// load-balancer hosts' conntrack tables nearly empty, then full of
// unrelated entries, and how long the deletion of one address's entries
// takes (the new holder's last step before it adds the address). For the
// full tables it raises the machine's nf_conntrack_max until it ends
// (raiseConntrackMax). See docs/benchmarks.md.
func TestFailoverConntrackBenchmark(t *testing.T) {
	skipUnlessBench(t)
	trials := benchTrials(10)
	loads := []string{loadAverage()}
	restoreConntrackMax(t)
	b := startClusterBench(t, realcluster.Options{
		Topology: netlab.Topology{LBHosts: lbHosts, Clients: []string{"client"}},
		Workers:  2,
	})
	vip := b.deployFailover(t)[implPassthrough]
	// -v=2: the agents log their deletions.
	b.setAgentArgs(t, "--ownership-hold-down="+benchHoldDown.String(), "--v=2")
	linkDown := b.faults(daemon{kill: b.killAgent, restart: b.agentBack})[0]
	empty := b.conntrackRun(t, linkDown, vip, trials)
	empty.impl = "groundcloud-conntrack-0"
	raised := raiseConntrackMax(t, len(b.lbs), conntrackWanted)
	limit, perNamespace := conntrackMax(t, b.lbs[0])
	entries := min(conntrackWanted, limit-conntrackHeadroom)
	r := conntrackResult{entries: entries, limit: limit, perNamespace: perNamespace, raised: raised, buckets: conntrackBuckets(t, b.lbs[0])}
	r.fill = make([][]time.Duration, len(b.lbs))
	for i, h := range b.lbs {
		for q := range conntrackQuarters {
			start := time.Now()
			must(t, fillConntrack(h, q*entries/conntrackQuarters, (q+1)*entries/conntrackQuarters))
			r.fill[i] = append(r.fill[i], time.Since(start))
		}
		t.Logf("%d conntrack entries in %s in %v", entries, h.Name, r.fill[i])
	}
	var err error
	r.slabObjects, r.slabSize, err = conntrackSlab()
	must(t, err)
	loads = append(loads, loadAverage())
	full := b.conntrackRun(t, linkDown, vip, trials)
	full.impl = fmt.Sprintf("groundcloud-conntrack-%d", entries)
	for _, h := range b.lbs {
		r.counts = append(r.counts, conntrackCount(t, h))
	}
	r.runs, r.loads = []conntrackRun{empty, full}, append(loads, loadAverage())
	for _, run := range r.runs {
		fmt.Println(run.line())
	}
	if path := os.Getenv("GROUNDCLOUD_BENCH_DOCS"); path != "" && !t.Failed() {
		must(t, writeSection(path, "## Failover with a full conntrack table", conntrackSection(t, r, trials)))
		t.Logf("wrote the conntrack section of %s", path)
	}
}

// conntrackRun times deletions, then runs the trials and collects how long
// the agents' own deletions took at the takeovers.
func (b *bench) conntrackRun(t *testing.T, f fault, vip netip.Addr, trials int) conntrackRun {
	r := conntrackRun{deletions: deletionTimes(t, b.lbs[1], vip, 5)}
	seen := make([]int, len(b.lbs))
	for i := range b.lbs {
		seen[i] = len(b.agentDeletions(t, i))
	}
	r.scenario = b.run(t, "groundcloud", f, vip, b.l2Watch(vip), trials)
	for i := range b.lbs {
		all := b.agentDeletions(t, i)
		if len(all) < seen[i] {
			t.Fatalf("the agent logs on %s show %d deletions, fewer than the %d before the trials (a log rotated away)", b.lbs[i].Name, len(all), seen[i])
		}
		r.inAgent = append(r.inAgent, all[seen[i]:]...)
	}
	return r
}

// agentDeletionLine is what the agent logs (-v=2) after deleting the
// conntrack entries of addresses it takes over.
var agentDeletionLine = regexp.MustCompile(`"Deleted the conntrack entries of taken-over virtual IPs".* elapsed="([^"]+)"`)

// agentDeletions are the durations of the deletions that the logs of the
// agent containers on load-balancer host i show, oldest first (the
// kubelet's log files of a container, one per restart, in order).
func (b *bench) agentDeletions(t *testing.T, i int) []time.Duration {
	t.Helper()
	var out []time.Duration
	for _, log := range b.c.Node(b.lbs[i].Name).PodLogs() {
		if !strings.Contains(filepath.Base(filepath.Dir(filepath.Dir(log))), "groundcloud-agent") {
			continue
		}
		data, err := os.ReadFile(log)
		must(t, err)
		for _, m := range agentDeletionLine.FindAllSubmatch(data, -1) {
			d, err := time.ParseDuration(string(m[1]))
			must(t, err)
			out = append(out, d)
		}
	}
	return out
}

// conntrackMax reads nf_conntrack_max in h, and whether h may change it
// (a limit of its own).
func conntrackMax(t *testing.T, h *netlab.Host) (int, bool) {
	t.Helper()
	n := readProcInt(t, h, "/proc/sys/net/netfilter/nf_conntrack_max")
	perNamespace := false
	must(t, h.Do(func() error {
		fi, err := os.Stat("/proc/sys/net/netfilter/nf_conntrack_max")
		perNamespace = err == nil && fi.Mode().Perm()&0o200 != 0
		return err
	}))
	return n, perNamespace
}

// conntrackCount is the number of entries in h's table.
func conntrackCount(t *testing.T, h *netlab.Host) int {
	t.Helper()
	return readProcInt(t, h, "/proc/sys/net/netfilter/nf_conntrack_count")
}

// conntrackBuckets is the size of the conntrack hash, which every
// namespace shares (h reads the machine's).
func conntrackBuckets(t *testing.T, h *netlab.Host) int {
	t.Helper()
	return readProcInt(t, h, "/proc/sys/net/netfilter/nf_conntrack_buckets")
}

func readProcInt(t *testing.T, h *netlab.Host, path string) int {
	t.Helper()
	out, err := h.Command(t.Context(), "cat", path).Output()
	must(t, err)
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	must(t, err)
	return n
}

// fillConntrack creates entries from to to (exclusive) in h's conntrack
// table, as `conntrack -I` does: UDP and TCP flows from 10.0.0.0/8 to
// 198.51.100.7:443, with an hour to live; entry i is the same flow
// whichever call creates it.
func fillConntrack(h *netlab.Host, from, to int) error {
	return h.Do(func() error {
		nh, err := netlink.NewHandle(unix.NETLINK_NETFILTER)
		if err != nil {
			return err
		}
		defer nh.Close()
		server := net.IPv4(198, 51, 100, 7).To4()
		for i := from; i < to; i++ {
			client := net.IPv4(10, byte(i>>16), byte(i>>8), byte(i)).To4()
			port := uint16(1024 + i%60000)
			proto := uint8(unix.IPPROTO_UDP)
			var info netlink.ProtoInfo
			if i%2 == 1 {
				proto, info = unix.IPPROTO_TCP, &netlink.ProtoInfoTCP{State: 3} // established
			}
			f := &netlink.ConntrackFlow{
				FamilyType: unix.AF_INET,
				Forward:    netlink.IPTuple{Protocol: proto, SrcIP: client, DstIP: server, SrcPort: port, DstPort: 443},
				Reverse:    netlink.IPTuple{Protocol: proto, SrcIP: server, DstIP: client, SrcPort: 443, DstPort: port},
				TimeOut:    3600,
				ProtoInfo:  info,
			}
			if err := nh.ConntrackCreate(netlink.ConntrackTable, unix.AF_INET, f); err != nil {
				return fmt.Errorf("entry %d: %w", i, err)
			}
		}
		return nil
	})
}

// deletionTimes times n deletions of the entries of vip in h, as a host
// that takes vip over does before it adds it.
func deletionTimes(t *testing.T, h *netlab.Host, vip netip.Addr, n int) []time.Duration {
	t.Helper()
	var out []time.Duration
	for range n {
		start := time.Now()
		must(t, h.Do(func() error {
			return dataplane.NetlinkConntrack{}.DeleteFlowsTo(context.Background(), []netip.Addr{vip})
		}))
		out = append(out, time.Since(start))
	}
	return out
}

// conntrackRun is the failover trials and the timed deletions with one
// table size.
type conntrackRun struct {
	scenario
	deletions []time.Duration // timed by the benchmark
	inAgent   []time.Duration // the agents' own, at takeovers (both ways)
}

func (r conntrackRun) line() string {
	return fmt.Sprintf("%s delete_p50_ms=%.1f delete_max_ms=%.1f agent_delete_p50_ms=%.1f agent_delete_max_ms=%.1f", r.scenario.line(),
		msf(percentile(r.deletions, 50)), msf(percentile(r.deletions, 100)), msf(percentile(r.inAgent, 50)), msf(percentile(r.inAgent, 100)))
}

func msf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

type conntrackResult struct {
	runs           []conntrackRun // nearly empty tables, then full ones
	entries, limit int
	perNamespace   bool
	raised         string            // what raiseConntrackMax did, or why not
	buckets        int               // nf_conntrack_buckets
	fill           [][]time.Duration // per LB host, per quarter of its entries
	slabObjects    int               // entries of every namespace after the fill
	slabSize       int               // bytes of a struct nf_conn
	counts         []int             // entries in each LB host after the trials
	loads          []string          // load average at the start, before the full run, at the end
}

func conntrackSection(t *testing.T, r conntrackResult, trials int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Failover with a full conntrack table\n\n")
	fmt.Fprintf(&b, "The groundcloud link-down failover of the section above, first with the load-balancer hosts' conntrack tables nearly empty, then with %d unrelated entries in each, in the same run. Before a host adds an address it takes over, its agent deletes the conntrack entries of that address; this measures what that costs when the table is full. Written by `make bench` on %s; not a pass/fail test.\n\n", r.entries, time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(&b, "### Machine and versions\n\n")
	for _, l := range machine(t) {
		fmt.Fprintf(&b, "- %s\n", l)
	}
	fmt.Fprintf(&b, "- load average (1, 5, 15 min) at the start: %s; before the run with full tables: %s; at the end: %s (other work shares this machine, real-cluster tests among it)\n", r.loads[0], r.loads[1], r.loads[2])
	where := "global: the namespaces of the test hosts cannot raise it"
	if r.perNamespace {
		where = "per network namespace here"
	}
	fmt.Fprintf(&b, "- nf_conntrack_max %d for the run with full tables (%s; %s), so %d entries per load-balancer host (%d asked for), leaving %d for the benchmark's own flows\n", r.limit, where, r.raised, r.entries, conntrackWanted, conntrackHeadroom)
	fmt.Fprintf(&b, "- nf_conntrack_buckets %d: the size of the one hash that the entries of every namespace share\n", r.buckets)
	fmt.Fprintf(&b, "\n### Summary (%d trials per row)\n\n", trials)
	fmt.Fprintf(&b, "| code | entries | gap p50 | gap max | takeover p50 | takeover max | deleting one address's entries p50 | max | failed new connections | long-lived connections broken |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|---|\n")
	var inAgent []string
	entries := []int{0, r.entries}
	for i, run := range r.runs {
		gaps, _, take, failed, broken, held := run.gaps()
		fmt.Fprintf(&b, "| this commit | %d | %s | %s | %s | %s | %s | %s | %d | %d of %d |\n", entries[i],
			seconds(percentile(gaps, 50)), seconds(percentile(gaps, 100)), seconds(percentile(take, 50)), seconds(percentile(take, 100)),
			millis(percentile(run.deletions, 50)), millis(percentile(run.deletions, 100)), failed, broken, held)
		inAgent = append(inAgent, fmt.Sprintf("with %d entries %s (p50) and %s (max) over %d takeovers", entries[i],
			millis(percentile(run.inAgent, 50)), millis(percentile(run.inAgent, 100)), len(run.inAgent)))
	}
	b.WriteString(conntrackBefore)
	emptyGaps, _, _, _, _, _ := r.runs[0].gaps()
	fullGaps, _, _, _, _, _ := r.runs[1].gaps()
	fmt.Fprintf(&b, "\nWith %d entries, deleting one address's entries took %s (p50) against %s with a nearly empty table, and new connections failed for %s (p50) against %s. "+
		"The agent no longer copies the table, but the kernel still walks the whole hash for each deletion, the entries of every namespace in it (here those of both load-balancer hosts, %d after the fill), more slowly while other work competes for the CPU: a takeover still costs more with a larger table, by that walk. "+
		"In the agents themselves, at the takeovers of the trials (both ways), the deletion took %s. "+
		"After the trials the load-balancer hosts' tables held %v entries.\n",
		r.entries, millis(percentile(r.runs[1].deletions, 50)), millis(percentile(r.runs[0].deletions, 50)),
		seconds(percentile(fullGaps, 50)), seconds(percentile(emptyGaps, 50)), r.slabObjects, strings.Join(inAgent, ", "), r.counts)
	b.WriteString(conntrackHash(r))
	b.WriteString(conntrackMethod)
	fmt.Fprintf(&b, "\n### Raw numbers\n\nPer row: the line printed, the deletions timed by the benchmark and those the agents logged, in milliseconds, then per trial gap / recovered / takeover in milliseconds / long-lived connections broken. Last, the fill of each load-balancer host, per quarter of its entries, in milliseconds.\n\n```\n")
	for _, run := range r.runs {
		fmt.Fprintf(&b, "%s\n  deletions:", run.line())
		for _, d := range run.deletions {
			fmt.Fprintf(&b, " %.1f", msf(d))
		}
		fmt.Fprintf(&b, "\n  in the agents:")
		for _, d := range run.inAgent {
			fmt.Fprintf(&b, " %.1f", msf(d))
		}
		var per []string
		for _, tr := range run.trials {
			per = append(per, fmt.Sprintf("%d/%d/%d/%d", tr.outage.Gap.Milliseconds(), tr.outage.Recovered.Milliseconds(), tr.takeover.Milliseconds(), tr.broken))
		}
		fmt.Fprintf(&b, "\n  trials: %s\n", strings.Join(per, " "))
	}
	for i, f := range r.fill {
		fmt.Fprintf(&b, "fill of load-balancer host %d:", i+1)
		for _, d := range f {
			fmt.Fprintf(&b, " %d", d.Milliseconds())
		}
		b.WriteString("\n")
	}
	b.WriteString("```\n")
	return b.String()
}

// conntrackHash says what the entries did to the shared hash, from what
// was measured: the entries the slab held, the buckets, and how long
// inserting took as the chains grew.
func conntrackHash(r conntrackResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n### The conntrack hash with %d entries per host\n\n", r.entries)
	fmt.Fprintf(&b, "The entries of every namespace share one hash of nf_conntrack_buckets = %d buckets, sized when nf_conntrack was loaded (from the machine's memory); raising nf_conntrack_max does not resize it. "+
		"(On this kernel nf_conntrack_buckets is writable in the initial namespace, which rehashes the table; the benchmark leaves it as a host that only raised the limit has it.) "+
		"After the fill the nf_conntrack slab held %d entries of %d B for the whole machine: %.1f per bucket on average, where a table filled to as many entries as there are buckets has 1. "+
		"Every lookup (each packet conntrack sees, each insert) walks its bucket's chain, so the chains were that many times longer than at that load.\n\n",
		r.buckets, r.slabObjects, r.slabSize, float64(r.slabObjects)/float64(max(r.buckets, 1)))
	fmt.Fprintf(&b, "Inserting the entries over netlink (each insert looks its tuple up first), per quarter of each host's entries; the load is the entries of both hosts per bucket while that quarter went in:\n\n")
	fmt.Fprintf(&b, "| host | quarter | entries per bucket | time | per entry |\n|---|---|---|---|---|\n")
	var first, last float64 // µs per entry
	for i, f := range r.fill {
		for q, d := range f {
			from := i*r.entries + q*r.entries/len(f)
			to := i*r.entries + (q+1)*r.entries/len(f)
			per := float64(d.Nanoseconds()) / 1000 / float64(max(to-from, 1))
			if i == 0 && q == 0 {
				first = per
			}
			last = per
			fmt.Fprintf(&b, "| %d | %d | %.1f to %.1f | %s | %.1f µs |\n", i+1, q+1,
				float64(from)/float64(max(r.buckets, 1)), float64(to)/float64(max(r.buckets, 1)), seconds(d), per)
		}
	}
	if first > 0 {
		fmt.Fprintf(&b, "\nThe last quarter took %.2f times as long per entry as the first. One netlink request per insert costs some %.0f µs, and the machine's other work changes over the minutes a fill takes (see the load average above), so at this grain the walk of the longer chains is not told apart from that noise.\n", last/first, first)
	}
	return b.String()
}

func millis(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

// conntrackBefore are the rows of this benchmark on the commit before the
// agent deleted conntrack entries by kernel filter (vishvananda/netlink's
// ConntrackDeleteFilters: the whole table dumped into the agent and matched
// there), measured once on the same machine (2026-12-01, 10 trials per
// row, load average 15-20 from other work on it) just before the run that
// first wrote this section.
const conntrackBefore = `| before (7e7d96e) | 0 | 0.76 s | 1.02 s | 0.77 s | 1.02 s | 3.1 ms | 3.6 ms | 375 | 0 of 40 |
| before (7e7d96e) | 250000 | 2.64 s | 3.12 s | 2.65 s | 3.11 s | 1705.8 ms | 3116.0 ms | 1317 | 0 of 40 |

The "before" rows are this benchmark run once on commit 7e7d96e, where the agent dumped the whole table into itself and matched there, on the same machine (2026-12-01, load average 15-20 from other work on it); the benchmark then ran on the simulated nodes' sandbox (agents as processes, nodes answering NodePorts themselves, proxy forwarding), so compare their deletion times with the rows above rather than their gaps.
`

const conntrackMethod = `
### Method

- As in the failover section above (the real cluster: 2 dedicated
  load-balancer hosts, 2 workers with a Pod of groundcloud-echo each, a
  client opening a connection every 20 ms and holding 4 long-lived ones),
  the Service with passthrough forwarding, link-down faults only.
- Before the trials, each load-balancer host's table is filled over
  netlink (as ` + "`conntrack -I`" + ` does) with established TCP and UDP entries
  between 10.0.0.0/8 and 198.51.100.7:443 with an hour to live: none of
  them is the virtual IP's, so they only make the table large.
- Deleting one address's entries: ` + "`dataplane.NetlinkConntrack.DeleteFlowsTo`" + `
  of the virtual IP, timed five times in the standby host's namespace (the
  call the agent makes before it adds an address it takes over), and as
  the agents log it at each takeover of the trials, both ways (the
  benchmark runs them at -v=2).
- nf_conntrack_max is global, so for the run with full tables the
  benchmark raises the machine's to the entries plus the headroom, and
  puts it back when it ends, failed or not, before its cluster stops. Its
  cluster holds the machine-wide lock of the test beds meanwhile (no other
  real-cluster test starts, or compares the machine's settings, while the
  value is not the machine's own), and the value it found is recorded in
  ` + "`/run/groundcloud-bench.sysctls.json`" + `: a run that finds the record (left
  by one that crashed) writes that value back first. It raises nothing
  when MemAvailable is below 2 tables × the entries × 350 B + 1 GiB.
- Reproduce: ` + "`hack/bench.sh TestFailoverConntrackBenchmark`" + ` (as root).
`

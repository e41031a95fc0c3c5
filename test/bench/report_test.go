package bench

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/groundcloud/groundcloud/test/framework/controlplane"
)

// percentile is the nearest-rank p-th percentile (0 < p <= 100).
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := (p*len(s) + 99) / 100
	return s[max(rank, 1)-1]
}

func (s scenario) gaps() (gaps, recovered, takeovers []time.Duration, failed, broken, held int) {
	for _, t := range s.trials {
		gaps = append(gaps, t.outage.Gap)
		recovered = append(recovered, t.outage.Recovered)
		takeovers = append(takeovers, t.takeover)
		failed += t.outage.Failed
		broken += t.broken
		held += t.held
	}
	return
}

// line is the scenario's machine-readable summary.
func (s scenario) line() string {
	gaps, rec, take, failed, broken, held := s.gaps()
	return fmt.Sprintf("BENCH failover impl=%s fault=%s trials=%d gap_p50_ms=%d gap_max_ms=%d recovered_p50_ms=%d recovered_max_ms=%d takeover_p50_ms=%d failed_attempts=%d long_lived_broken=%d long_lived=%d",
		s.impl, s.fault, len(s.trials), percentile(gaps, 50).Milliseconds(), percentile(gaps, 100).Milliseconds(),
		percentile(rec, 50).Milliseconds(), percentile(rec, 100).Milliseconds(), percentile(take, 50).Milliseconds(), failed, broken, held)
}

func failoverSection(t *testing.T, results []scenario, trials int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Failover\n\n")
	fmt.Fprintf(&b, "How long new connections to a virtual IP fail when the load-balancer host holding it fails, and whether established connections survive: groundcloud (`--vip-ownership=memberlist`, default failure detection, and the fast detector) next to keepalived (VRRP, default timers and its fastest) on the same hosts and the same data plane. Whether the fast settings move an address when nothing failed is the section [Failover under load and loss](#failover-under-load-and-loss). Written by `make bench` on %s; not a pass/fail test.\n\n", time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(&b, "### Machine and versions\n\n")
	for _, l := range machine(t) {
		fmt.Fprintf(&b, "- %s\n", l)
	}
	fmt.Fprintf(&b, "\n### Summary (%d trials per row)\n\n", trials)
	fmt.Fprintf(&b, "| implementation | fault | gap p50 | gap max | recovered p50 | recovered max | failed new connections | long-lived connections broken |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|\n")
	for _, s := range results {
		gaps, rec, _, failed, broken, held := s.gaps()
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %d | %d of %d |\n", s.impl, s.fault,
			seconds(percentile(gaps, 50)), seconds(percentile(gaps, 100)), seconds(percentile(rec, 50)), seconds(percentile(rec, 100)), failed, broken, held)
	}
	b.WriteString(summary(results))
	b.WriteString(method)
	fmt.Fprintf(&b, "\n### Raw numbers\n\nOne line per scenario (as printed), then per trial: gap / recovered / takeover in milliseconds / long-lived connections broken.\n\n```\n")
	for _, s := range results {
		fmt.Fprintf(&b, "%s\n", s.line())
		var per []string
		for _, tr := range s.trials {
			per = append(per, fmt.Sprintf("%d/%d/%d/%d", tr.outage.Gap.Milliseconds(), tr.outage.Recovered.Milliseconds(), tr.takeover.Milliseconds(), tr.broken))
		}
		fmt.Fprintf(&b, "  %s %s: %s\n", s.impl, s.fault, strings.Join(per, " "))
	}
	b.WriteString("```\n")
	return b.String()
}

// summary compares the implementations per fault in words.
func summary(results []scenario) string {
	var b strings.Builder
	b.WriteString("\n")
	byKey := map[string]scenario{}
	for _, s := range results {
		byKey[s.impl+"/"+s.fault] = s
	}
	gc, ka := byKey["groundcloud/link-down"], byKey["keepalived/link-down"]
	if len(gc.trials) > 0 && len(ka.trials) > 0 {
		g, _, _, _, _, _ := gc.gaps()
		k, _, _, _, _, _ := ka.gaps()
		fmt.Fprintf(&b, "When the holding host dies (link-down), new connections fail for %s (p50; at most %s) with groundcloud and %s (p50; at most %s) with keepalived.",
			seconds(percentile(g, 50)), seconds(percentile(g, 100)), seconds(percentile(k, 50)), seconds(percentile(k, 100)))
		if p := percentile(g, 50); p > 0 {
			fmt.Fprintf(&b, " That is %.1f times shorter.", percentile(k, 50).Seconds()/p.Seconds())
		}
		b.WriteString("\n")
	}
	fast, kaFast := byKey[implFast+"/link-down"], byKey[implKeepalivedFast+"/link-down"]
	if len(gc.trials) > 0 && len(fast.trials) > 0 {
		g, _, _, _, _, _ := gc.gaps()
		f, _, _, _, _, _ := fast.gaps()
		fmt.Fprintf(&b, "With the fast detector (%s), the gap is %s (p50; at most %s) instead of %s.", "`"+strings.Join(fastDetection, " ")+"`",
			seconds(percentile(f, 50)), seconds(percentile(f, 100)), seconds(percentile(g, 50)))
		if len(kaFast.trials) > 0 {
			k, _, _, _, _, _ := kaFast.gaps()
			fmt.Fprintf(&b, " keepalived with an advertisement every 10 ms (VRRPv3): %s (p50; at most %s).", seconds(percentile(k, 50)), seconds(percentile(k, 100)))
		}
		b.WriteString("\n")
	}
	b.WriteString("When only the daemon is killed (kill-9), its host keeps the address and the nftables rules and goes on forwarding until clients follow the new holder's announcements, so new connections barely notice with either; the takeover column of the raw numbers shows when the other host took the address.\n")
	for _, s := range results {
		if _, _, _, _, broken, held := s.gaps(); broken > 0 {
			fmt.Fprintf(&b, "\n%s, %s: %d of %d long-lived connections broke (per trial in the raw numbers; see below why).\n", s.impl, s.fault, broken, held)
		}
	}
	return b.String()
}

const method = `
### Method

- Topology: the real cluster (test/framework/realcluster) in network namespaces on
  one bridge: etcd, kube-apiserver, kube-controller-manager,
  kube-scheduler; containerd, kubelet and kube-proxy (nftables) in every
  node; groundcloud installed from deploy/. 2 dedicated load-balancer
  hosts (Nodes, tainted and excluded from backends) run the agent
  DaemonSet; 2 workers run one groundcloud-echo Pod each; 1 client. Two
  LoadBalancer Services (TCP port 80 to the Pods' line echo,
  externalTrafficPolicy Cluster): one with passthrough forwarding (the
  pool's default; "groundcloud" below: the load-balancer host forwards
  packets unchanged and keeps no per-flow state), one with proxy
  forwarding ("groundcloud-proxy": DNAT and SNAT on the load-balancer
  host, the same buckets everywhere, net.netfilter.nf_conntrack_tcp_loose
  1). The kubelets restart a killed container after at most 2 s
  (crashLoopBackOff.maxContainerRestartPeriod).
- groundcloud: the agents of deploy/ (` + "`--vip-ownership=memberlist`" + `, default
  failure detection: probe every 200 ms, 100 ms timeout, suspicion 2 probe
  intervals) plus ` + "`--ownership-hold-down=3s`" + `, which only shortens the
  return between trials. groundcloud-fast: the same with the fast
  detector, ` + "`--gossip-probe-interval=50ms --gossip-probe-timeout=25ms --gossip-suspicion-multiplier=1`" + `,
  on the passthrough Service.
- keepalived: the Debian package, VRRP only, in each load-balancer host's
  namespace, holding the passthrough Service's virtual IP with its default
  timers (advert_int 1, preemption, default gratuitous ARP settings);
  priority 150 on lb-1, 100 on lb-2. keepalived-fast: the same with its
  fastest advertisements (` + "`version 3`" + `, ` + "`advert_int 0.01`" + `: the backup
  takes over after about 3 missed advertisements, 30 to 40 ms). The agents run with
  ` + "`--vip-ownership=none`" + `: they program the same data plane and hold no
  address.
- Client: from the client host, a new TCP connection to the virtual IP
  every 20 ms, each successful when connected and greeted by a Pod within
  500 ms (shorter than TCP's first SYN retransmission, so an attempt says
  whether its first SYN was answered); and 4 long-lived connections, each
  sending a line every 100 ms that the Pod echoes.
- Faults, each on the host holding the address: link-down sets its link
  down (a dead host or a pulled cable; restored by setting it up again);
  kill-9 sends SIGKILL to the daemon that holds the address (the agent's
  container, which its kubelet restarts, or keepalived's process group,
  started again afterwards).
  A killed daemon leaves the address and the nftables rules in its
  kernel, so that host keeps forwarding what still reaches it.
- Gap: from the start of the first failed new connection to the start of
  the next successful one (0 when none failed). Recovered: from the fault
  to the start of the first successful new connection after the last
  failed one. Takeover: from the fault until another host held the address.
- Between trials the fault is undone and the address goes back to its
  first holder (groundcloud after its hold-down, keepalived by preemption).
- Why a held connection can break on a takeover with proxy forwarding
  (passthrough keeps no conntrack entry on the load-balancer host): the new holder may still
  have a conntrack entry from the last time it held the address, for the
  same client address and port (a short connection from an earlier trial,
  in TIME_WAIT for 120 s). A packet of the live connection arriving in
  mid-stream then matches that entry, falls out of its TCP window and is
  left untranslated: the agent drops it (before 2026-12-03 the host's own
  stack reset it), and the connection stalls until the stale entry is
  gone. groundcloud's agent deletes the conntrack entries of an address
  before it takes it over;
  with keepalived the agents do not know when the address moves
  (` + "`--vip-ownership=none`" + `), so the stale entries stay.
- Reproduce: ` + "`make bench`" + ` (as root; installs keepalived when missing;
  GROUNDCLOUD_BENCH_TRIALS=n changes the number of trials).
`

func seconds(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// machine describes where the benchmark ran.
func machine(t *testing.T) []string {
	var out []string
	cpu := ""
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		s := bufio.NewScanner(f)
		for s.Scan() {
			if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemTotal:" {
				var kb int
				fmt.Sscan(f[1], &kb)
				mem = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
			}
		}
	}
	var u unix.Utsname
	_ = unix.Uname(&u)
	out = append(out, fmt.Sprintf("%d cores (%s), %s memory, Linux %s", runtime.NumCPU(), cpu, mem, unix.ByteSliceToString(u.Release[:])))
	out = append(out, "groundcloud "+commit()+", "+memberlistVersion()+", "+runtime.Version())
	if v, err := exec.Command("keepalived", "--version").CombinedOutput(); err == nil {
		out = append(out, strings.TrimSpace(strings.SplitN(string(v), "\n", 2)[0])+" (Debian package)")
	}
	if v, err := exec.Command("nft", "--version").CombinedOutput(); err == nil {
		out = append(out, strings.TrimSpace(string(v)))
	}
	if v := wrkVersion(); v != "" {
		out = append(out, "wrk "+v+" (Debian package)")
	}
	if v := haproxyVersion(); v != "" {
		out = append(out, "HAProxy "+v+" (Debian package)")
	}
	return out
}

// wrkVersion is wrk's version ("debian/4.1.0-3+b2"), empty when wrk is
// missing. wrk -v prints it and exits with status 1.
func wrkVersion() string {
	v, _ := exec.Command("wrk", "-v").CombinedOutput()
	if f := strings.Fields(string(v)); len(f) >= 2 && f[0] == "wrk" {
		return f[1]
	}
	return ""
}

// haproxyVersion is HAProxy's version ("2.6.12-1+deb12u4"), empty when
// HAProxy is missing.
func haproxyVersion() string {
	v, err := exec.Command("haproxy", "-v").Output()
	if f := strings.Fields(string(v)); err == nil && len(f) >= 3 && f[1] == "version" {
		return f[2]
	}
	return ""
}

func numCPU() int { return runtime.NumCPU() }

func commit() string {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return "(unknown commit)"
	}
	rev, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "(unknown commit)"
	}
	out := "commit " + strings.TrimSpace(string(rev))
	if st, err := exec.Command("git", "-C", root, "status", "--porcelain").Output(); err == nil && len(st) > 0 {
		out += " with uncommitted changes"
	}
	return out
}

func memberlistVersion() string {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return "hashicorp/memberlist"
	}
	b, _ := os.ReadFile(root + "/go.mod")
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "github.com/hashicorp/memberlist" {
			return "hashicorp/memberlist " + f[1]
		}
	}
	return "hashicorp/memberlist"
}

// writeSection replaces the section that starts with heading (up to the
// next heading of the same level) in the file at path, or appends it;
// the rest of the file is kept as it is.
func writeSection(path, heading, section string) error {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	text := string(old)
	if text == "" {
		text = "# Benchmarks\n\nMeasured by `make bench` (hack/bench.sh); each section is written by its benchmark.\n"
	}
	lines := strings.SplitAfter(text, "\n")
	start, end := -1, len(lines)
	for i, l := range lines {
		switch {
		case strings.TrimRight(l, "\n") == heading:
			start = i
		case start >= 0 && i > start && strings.HasPrefix(l, "## "):
			end = i
		}
		if start >= 0 && end != len(lines) {
			break
		}
	}
	var out string
	if start < 0 {
		out = strings.TrimRight(text, "\n") + "\n\n" + section
	} else {
		rest := strings.Join(lines[end:], "")
		if rest != "" {
			section += "\n"
		}
		out = strings.Join(lines[:start], "") + section + rest
	}
	return os.WriteFile(path, []byte(out), 0o644)
}

func TestWriteSection(t *testing.T) {
	path := t.TempDir() + "/b.md"
	if err := os.WriteFile(path, []byte("# Benchmarks\n\nintro\n\n## Other\n\nkeep\n\n## Failover\n\nold\n\n## Later\n\nkeep too\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeSection(path, "## Failover", "## Failover\n\nnew\n"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	want := "# Benchmarks\n\nintro\n\n## Other\n\nkeep\n\n## Failover\n\nnew\n\n## Later\n\nkeep too\n"
	if string(b) != want {
		t.Errorf("got:\n%s\nwant:\n%s", b, want)
	}
	path2 := t.TempDir() + "/new.md"
	if err := writeSection(path2, "## Failover", "## Failover\n\nnew\n"); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(path2)
	if !strings.HasPrefix(string(b), "# Benchmarks") || !strings.HasSuffix(string(b), "## Failover\n\nnew\n") {
		t.Errorf("new file:\n%s", b)
	}
}

func TestPercentile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	if p := percentile(ds, 50); p != 5 {
		t.Errorf("p50 = %d", p)
	}
	if p := percentile(ds, 100); p != 10 {
		t.Errorf("max = %d", p)
	}
	if p := percentile(nil, 50); p != 0 {
		t.Errorf("empty = %d", p)
	}
}

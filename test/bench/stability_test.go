package bench

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/groundcloud/groundcloud/test/framework/availability"
	"github.com/groundcloud/groundcloud/test/framework/netlab"
	"github.com/groundcloud/groundcloud/test/framework/realcluster"
)

// stabilityDuration is how long each setting of the stability benchmark
// runs under load and loss, unless GROUNDCLOUD_BENCH_STABILITY says.
const stabilityDuration = 10 * time.Minute

// lossPercent is the share of the holder's packets dropped, each way.
const lossPercent = 1

// stability is what one setting did while its holder was busy and lossy.
type stability struct {
	impl     string
	duration time.Duration
	// moves of the address; failed and attempts: new connections;
	// broken of held long-lived connections.
	moves, failed, attempts, broken, held int
	// dropped are the packets the loss rules dropped; packets those the
	// holder's link carried meanwhile.
	dropped, packets uint64
}

func (s stability) line() string {
	return fmt.Sprintf("BENCH failover-stability impl=%s seconds=%d moves=%d failed_attempts=%d attempts=%d long_lived_broken=%d long_lived=%d dropped_packets=%d link_packets=%d",
		s.impl, int(s.duration.Seconds()), s.moves, s.failed, s.attempts, s.broken, s.held, s.dropped, s.packets)
}

// TestFailoverStabilityBenchmark is the other side of fast failure
// detection: no failover when nothing failed. On the failover benchmark's
// cluster, for groundcloud's default failure detector, its fast one
// (fastDetection) and keepalived's fastest timers, the host holding the
// passthrough Service's address runs with every core of the machine busy
// and 1 % of its link's packets dropped each way, for
// GROUNDCLOUD_BENCH_STABILITY (10m); counted: moves of the address, new
// connections that failed, long-lived connections broken. See
// docs/benchmarks.md, section "Failover under load and loss".
func TestFailoverStabilityBenchmark(t *testing.T) {
	skipUnlessBench(t)
	start := time.Now()
	d := stabilityDuration
	if v, err := time.ParseDuration(os.Getenv("GROUNDCLOUD_BENCH_STABILITY")); err == nil && v > 0 {
		d = v
	}
	b := startClusterBench(t, realcluster.Options{
		Topology: netlab.Topology{LBHosts: lbHosts, Clients: []string{"client"}},
		Workers:  2,
	})
	vip := b.deployFailover(t)[implPassthrough]
	var results []stability
	t.Run(implPassthrough, func(t *testing.T) {
		b.setAgentArgs(t, "--ownership-hold-down="+benchHoldDown.String())
		results = append(results, b.stable(t, implPassthrough, vip, d))
	})
	t.Run(implFast, func(t *testing.T) {
		b.setAgentArgs(t, append([]string{"--ownership-hold-down=" + benchHoldDown.String()}, fastDetection...)...)
		results = append(results, b.stable(t, implFast, vip, d))
	})
	t.Run(implKeepalivedFast, func(t *testing.T) {
		b.setAgentArgs(t, "--vip-ownership=none")
		ka := b.startKeepalived(t, vip, keepalivedTimers[implKeepalivedFast])
		defer ka.stop()
		results = append(results, b.stable(t, implKeepalivedFast, vip, d))
	})
	for _, s := range results {
		fmt.Println(s.line())
	}
	if path := os.Getenv("GROUNDCLOUD_BENCH_DOCS"); path != "" && !t.Failed() {
		must(t, writeSection(path, "## Failover under load and loss", stabilitySection(t, results, d, time.Since(start))))
		t.Logf("wrote the section Failover under load and loss of %s", path)
	}
}

// stable waits until one host holds vip, then for d keeps every core of
// the machine busy from that host's namespace and drops lossPercent of
// its link's packets each way, while the failover client measures; it
// returns what happened to the address and the connections.
func (b *bench) stable(t *testing.T, impl string, vip netip.Addr, d time.Duration) stability {
	t.Helper()
	home := b.settled(t, vip, "")
	h := b.lbs[slicesIndex(b.lbs, home)]
	c, err := availability.Start(t.Context(), availability.Options{From: b.client, To: netip.AddrPortFrom(vip, 80)})
	must(t, err)
	before, err := countersOf(h)
	must(t, err)
	since := time.Now()
	stopBurn := burnCPU(t, h)
	must(t, setLoss(t.Context(), h, lossPercent))
	t.Logf("%s: %s holds %s; every core busy and %d %% loss on its link for %s", impl, home, vip, lossPercent, d)
	select {
	case <-time.After(d):
	case <-t.Context().Done():
	}
	dropped, err := lossDropped(context.Background(), h)
	must(t, err)
	must(t, clearLoss(context.Background(), h))
	stopBurn()
	after, err := countersOf(h)
	must(t, err)
	attempts := c.Attempts()
	s := stability{
		impl: impl, duration: d, attempts: len(attempts), dropped: dropped, packets: after.packets - before.packets,
		moves: availability.Moves(b.holders.Changes(vip, since)),
	}
	for _, a := range attempts {
		if a.Err != nil {
			s.failed++
		}
	}
	for _, conn := range c.Conns() {
		s.held++
		if conn.Err != nil {
			s.broken++
		}
	}
	c.Stop()
	t.Logf("%s", s.line())
	return s
}

func slicesIndex(hosts []*netlab.Host, name string) int {
	for i, h := range hosts {
		if h.Name == name {
			return i
		}
	}
	panic("no host " + name)
}

// burnCPU starts a busy loop per core in h's namespace (CPU is not
// namespaced: the whole machine is busy) and returns what stops them.
func burnCPU(t *testing.T, h *netlab.Host) func() {
	t.Helper()
	var procs []*netlab.Process
	for i := range runtime.NumCPU() {
		p, err := h.Start(context.Background(), filepath.Join(t.TempDir(), "burn"+strconv.Itoa(i)+".log"), "sh", "-c", "while :; do :; done")
		must(t, err)
		procs = append(procs, p)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		for _, p := range procs {
			_ = p.Stop()
		}
	}
	t.Cleanup(stop)
	return stop
}

// lossTable is the nftables table that drops packets of a host's link.
const lossTable = "groundcloud_bench_loss"

// setLoss drops percent of the packets h's link receives and of those it
// sends (netdev ingress and egress hooks: ARP, gossip and traffic alike).
func setLoss(ctx context.Context, h *netlab.Host, percent int) error {
	rules := fmt.Sprintf(`table netdev %[1]s {
  chain in {
    type filter hook ingress device %[2]q priority -500; policy accept;
    numgen random mod 100 < %[3]d counter drop
  }
  chain out {
    type filter hook egress device %[2]q priority -500; policy accept;
    numgen random mod 100 < %[3]d counter drop
  }
}
`, lossTable, h.Iface, percent)
	cmd := h.Command(ctx, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("loss rules in %s: %w: %s", h.Name, err, out)
	}
	return nil
}

var counterPackets = regexp.MustCompile(`counter packets (\d+)`)

// lossDropped returns the packets the loss rules of h dropped.
func lossDropped(ctx context.Context, h *netlab.Host) (uint64, error) {
	out, err := h.Command(ctx, "nft", "list", "table", "netdev", lossTable).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("loss rules in %s: %w: %s", h.Name, err, out)
	}
	var n uint64
	for _, m := range counterPackets.FindAllStringSubmatch(string(out), -1) {
		v, _ := strconv.ParseUint(m[1], 10, 64)
		n += v
	}
	return n, nil
}

func clearLoss(ctx context.Context, h *netlab.Host) error {
	if out, err := h.Command(ctx, "nft", "delete", "table", "netdev", lossTable).CombinedOutput(); err != nil {
		return fmt.Errorf("loss rules in %s: %w: %s", h.Name, err, out)
	}
	return nil
}

func stabilitySection(t *testing.T, results []stability, d, elapsed time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Failover under load and loss\n\n")
	fmt.Fprintf(&b, "The other side of fast failure detection: whether an address moves when nothing failed. The host holding a virtual IP runs for %s with every core of the machine busy and %d %% of its link's packets dropped each way, for groundcloud's default failure detector, its fast one and keepalived's fastest timers. Written by `make bench` on %s (%s for the whole benchmark, cluster start included); not a pass/fail test.\n\n",
		d, lossPercent, time.Now().UTC().Format("2006-01-02"), elapsed.Round(time.Second))
	fmt.Fprintf(&b, "### Machine and versions\n\n")
	for _, l := range machine(t) {
		fmt.Fprintf(&b, "- %s\n", l)
	}
	fmt.Fprintf(&b, "\n### Results\n\n")
	b.WriteString("| implementation | failure detection | time under load and loss | moves of the address | failed new connections | long-lived connections broken | packets dropped / carried by the holder's link |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, s := range results {
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %d of %d (%.2f %%) | %d of %d | %d / %d |\n", s.impl, detectionOf(s.impl), s.duration, s.moves,
			s.failed, s.attempts, 100*float64(s.failed)/float64(max(s.attempts, 1)), s.broken, s.held, s.dropped, s.packets)
	}
	b.WriteString(stabilityMethod)
	fmt.Fprintf(&b, "\n### Raw numbers\n\n```\n")
	for _, s := range results {
		fmt.Fprintf(&b, "%s\n", s.line())
	}
	b.WriteString("```\n")
	return b.String()
}

// detectionOf says how a scenario detects a dead holder.
func detectionOf(impl string) string {
	switch impl {
	case implFast:
		return "memberlist: probe every 50 ms, 25 ms timeout, suspicion 1 interval (" + "`" + strings.Join(fastDetection, " ") + "`)"
	case implKeepalived:
		return "VRRPv2, advertisement every 1 s"
	case implKeepalivedFast:
		return "VRRPv3, advertisement every 10 ms"
	}
	return "memberlist: probe every 200 ms, 100 ms timeout, suspicion 2 intervals (the defaults)"
}

const stabilityMethod = `
### Method

- The failover benchmark's cluster and Services (section Failover): 2
  load-balancer hosts, 2 workers, a client; the passthrough Service's
  address, held by one host (groundcloud's memberlist election, or
  keepalived with ` + "`--vip-ownership=none`" + ` on the agents).
- Load: a shell busy loop per core of the machine, started in the holding
  host's network namespace (CPU time is not namespaced: every process of
  the test bed, both agents, the kubelets and the control plane compete
  with them).
- Loss: an nftables netdev table on the holding host's link, ingress and
  egress, that drops each packet with probability 1 % (` + "`numgen random mod 100 < 1 drop`" + `):
  gossip, VRRP, ARP and the client's traffic alike. The kernel of this
  machine has no netem qdisc.
- Measured meanwhile, as in the Failover section: a new connection every
  20 ms (failed when not greeted within 500 ms: a lost SYN or SYN-ACK
  fails its attempt, so about 1 to 2 % fail from the loss alone), 4
  long-lived connections; and the addresses each host holds, sampled every
  10 ms. A move is the address appearing on a host that did not hold it
  just before: a false failover (and its return counts again). Failed new
  connections and the holder's packets count only while the lossy host
  holds the address: after a move that is not undone, the traffic no
  longer crosses the lossy link (hence few of either).
- Reproduce: ` + "`hack/bench.sh TestFailoverStabilityBenchmark`" + ` (as root;
  GROUNDCLOUD_BENCH_STABILITY=10m sets the time per implementation).
`

package bench

import (
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/groundcloud/groundcloud/test/framework/availability"
	"github.com/groundcloud/groundcloud/test/framework/frr"
	"github.com/groundcloud/groundcloud/test/framework/realcluster"
)

// bgpResults is what TestBGPBenchmark measured.
type bgpResults struct {
	trials   int
	failover []scenario
	cfg      dpConfig
	runs     []ecmpRun
	elapsed  time.Duration
}

// failedShare is the share of new connections that failed among those
// started while some failed (from just before the fault to the recovery),
// over every trial; 0 when none failed.
func (s scenario) failedShare() float64 {
	failed, affected := 0, 0
	for _, tr := range s.trials {
		failed += tr.outage.Failed
		affected += tr.affected
	}
	if affected == 0 {
		return 0
	}
	return float64(failed) / float64(affected)
}

// bgpLine is a failover scenario's machine-readable summary.
func (s scenario) bgpLine() string {
	gaps, rec, moved, failed, broken, held := s.gaps()
	affected := 0
	for _, tr := range s.trials {
		affected += tr.affected
	}
	return fmt.Sprintf("BENCH bgp-failover announce=%s fault=%s trials=%d gap_p50_ms=%d gap_max_ms=%d recovered_p50_ms=%d recovered_max_ms=%d moved_p50_ms=%d failed_attempts=%d attempts_while_failing=%d long_lived_broken=%d long_lived=%d",
		s.impl, s.fault, len(s.trials), percentile(gaps, 50).Milliseconds(), percentile(gaps, 100).Milliseconds(),
		percentile(rec, 50).Milliseconds(), percentile(rec, 100).Milliseconds(), percentile(moved, 50).Milliseconds(), failed, affected, broken, held)
}

func (r ecmpRun) line() string {
	var hosts []string
	for i, c := range r.perHost {
		hosts = append(hosts, fmt.Sprintf("lb%d_packets=%d lb%d_bytes=%d", i+1, c.packets, i+1, c.bytes))
	}
	return fmt.Sprintf("BENCH bgp-ecmp round=%d mode=%s hosts=%d rps=%.0f p50_us=%d p99_us=%d errors=%d cpu_ms=%d %s",
		r.round, r.mode, r.hosts, r.rps, r.p50.Microseconds(), r.p99.Microseconds(), r.errors, r.cpu.Milliseconds(), strings.Join(hosts, " "))
}

func (res bgpResults) lines() []string {
	var out []string
	for _, s := range res.failover {
		out = append(out, s.bgpLine())
	}
	for _, r := range res.runs {
		out = append(out, r.line())
	}
	return out
}

// ecmpSummary sums up the runs of one mode with a number of announcing
// hosts.
type ecmpSummary struct {
	rps      float64 // median over the rounds
	min, max float64 // over the rounds
	p99      time.Duration
	packets  []uint64 // per load-balancer host, summed over the rounds
	cores    float64  // the machine's busy cores, mean over the rounds
}

func summarizeECMP(runs []ecmpRun, mode string, hosts int) ecmpSummary {
	var s ecmpSummary
	var rps []float64
	var p99 []time.Duration
	var busy, wall time.Duration
	for _, r := range runs {
		if r.mode != mode || r.hosts != hosts {
			continue
		}
		rps = append(rps, r.rps)
		p99 = append(p99, r.p99)
		busy += r.cpu
		wall += time.Duration(float64(r.requests) / max(r.rps, 1) * float64(time.Second))
		if s.packets == nil {
			s.packets = make([]uint64, len(r.perHost))
		}
		for i, c := range r.perHost {
			s.packets[i] += c.packets
		}
	}
	if len(rps) == 0 {
		return s
	}
	slices.Sort(rps)
	s.rps, s.min, s.max = median(rps), rps[0], rps[len(rps)-1]
	s.p99 = percentile(p99, 50)
	if wall > 0 {
		s.cores = busy.Seconds() / wall.Seconds()
	}
	return s
}

// ecmpRatios are, per round, the requests/s of mode with hosts announcing
// over those with one host in the same round (measured one after the
// other), in the order of the rounds.
func ecmpRatios(runs []ecmpRun, mode string, hosts int) []float64 {
	rps := map[[2]int]float64{}
	rounds := 0
	for _, r := range runs {
		if r.mode == mode {
			rps[[2]int{r.round, r.hosts}] = r.rps
			rounds = max(rounds, r.round)
		}
	}
	var out []float64
	for round := 1; round <= rounds; round++ {
		n, ok1 := rps[[2]int{round, hosts}]
		one, ok2 := rps[[2]int{round, 1}]
		if ok1 && ok2 && one > 0 {
			out = append(out, n/one)
		}
	}
	return out
}

// median is the middle value (the lower of the two middle ones).
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// shares formats each host's share of the packets.
func shares(packets []uint64) string {
	var total uint64
	for _, p := range packets {
		total += p
	}
	var out []string
	for i, p := range packets {
		share := 0.0
		if total > 0 {
			share = 100 * float64(p) / float64(total)
		}
		out = append(out, fmt.Sprintf("lb-%d %.0f %%", i+1, share))
	}
	return strings.Join(out, " / ")
}

func bgpSection(t *testing.T, res bgpResults) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## BGP\n\n")
	fmt.Fprintf(&b, "Failover and throughput of an address announced over BGP to a router (FRR) by both load-balancer hosts (ECMP), next to an address announced on the link (L2) on the same cluster. Written by `make bench` on %s (%s for the whole benchmark, cluster start included); not a pass/fail test.\n\n",
		time.Now().UTC().Format("2006-01-02"), res.elapsed.Round(time.Second))
	fmt.Fprintf(&b, "### Machine and versions\n\n")
	for _, l := range append(machine(t), frrVersion()) {
		fmt.Fprintf(&b, "- %s\n", l)
	}
	b.WriteString(bgpFailoverTable(res))
	b.WriteString(bgpThroughputTable(res))
	b.WriteString(bgpMethod)
	fmt.Fprintf(&b, "\n### Raw numbers\n\nOne line per scenario and per load (as printed), then per failover trial: gap / recovered / moved in milliseconds / new connections failed of those started while failing / long-lived connections broken.\n\n```\n")
	for _, l := range res.lines() {
		fmt.Fprintf(&b, "%s\n", l)
	}
	for _, s := range res.failover {
		var per []string
		for _, tr := range s.trials {
			per = append(per, fmt.Sprintf("%d/%d/%d/%d:%d/%d", tr.outage.Gap.Milliseconds(), tr.outage.Recovered.Milliseconds(), tr.takeover.Milliseconds(), tr.outage.Failed, tr.affected, tr.broken))
		}
		fmt.Fprintf(&b, "  %s %s: %s\n", s.impl, s.fault, strings.Join(per, " "))
	}
	b.WriteString("```\n")
	return b.String()
}

func bgpFailoverTable(res bgpResults) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n### Failover (%d trials per row)\n\n", res.trials)
	b.WriteString("| announced | fault | gap p50 | gap max | recovered p50 | recovered max | moved p50 | failed new connections | of those started while failing | long-lived connections broken |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range res.failover {
		gaps, rec, moved, failed, broken, held := s.gaps()
		share := "-"
		if failed > 0 {
			share = fmt.Sprintf("%.0f %%", 100*s.failedShare())
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %d | %s | %d of %d |\n", s.impl, s.fault,
			seconds(percentile(gaps, 50)), seconds(percentile(gaps, 100)), seconds(percentile(rec, 50)), seconds(percentile(rec, 100)),
			seconds(percentile(moved, 50)), failed, share, broken, held)
	}
	b.WriteString("\n")
	byKey := map[string]scenario{}
	for _, s := range res.failover {
		byKey[s.impl+"/"+s.fault] = s
	}
	l2, bgp := byKey[announceL2+"/link-down"], byKey[announceBGP+"/link-down"]
	if len(l2.trials) > 0 && len(bgp.trials) > 0 {
		_, l2rec, _, _, _, _ := l2.gaps()
		_, bgprec, _, _, _, _ := bgp.gaps()
		fmt.Fprintf(&b, "With a host's cable pulled, new connections to the L2 address failed until %s after the fault (p50), %.0f %% of those started meanwhile; to the BGP address until %s (p50; at most %s), bounded by the 3 s hold time (the router's hold timer runs from the last keepalive it received, one a second, so it expires 2 to 3 s after the cable is pulled), but only %.0f %% of those started meanwhile: the flows the router hashed to the lost host.\n",
			seconds(percentile(l2rec, 50)), 100*l2.failedShare(), seconds(percentile(bgprec, 50)), seconds(percentile(bgprec, 100)), 100*bgp.failedShare())
	}
	bfd := byKey[announceBFD+"/link-down"]
	if len(bgp.trials) > 0 && len(bfd.trials) > 0 {
		_, bgprec, bgpMoved, _, _, _ := bgp.gaps()
		_, bfdrec, bfdMoved, bfdFailed, bfdBroken, _ := bfd.gaps()
		fmt.Fprintf(&b, "With BFD between the hosts and the router (%s × %d), a pulled cable cost new connections to the BGP address until %s after the fault (p50; at most %s) instead of %s: the router's BFD session with the host went down after the detection time and took the BGP session and the host's routes with it (the route lost the host %s after the fault, p50, against %s on the hold timer); %d new connections failed, %.0f %% of those started meanwhile, and %d long-lived connections broke.\n",
			realcluster.BFDInterval, realcluster.BFDMultiplier, seconds(percentile(bfdrec, 50)), seconds(percentile(bfdrec, 100)), seconds(percentile(bgprec, 50)),
			seconds(percentile(bfdMoved, 50)), seconds(percentile(bgpMoved, 50)), bfdFailed, 100*bfd.failedShare(), bfdBroken)
	}
	l2, bgp = byKey[announceL2+"/sigterm"], byKey[announceBGP+"/sigterm"]
	if len(l2.trials) > 0 && len(bgp.trials) > 0 {
		_, _, _, l2failed, _, _ := l2.gaps()
		_, _, bgpMoved, bgpFailed, _, _ := bgp.gaps()
		fmt.Fprintf(&b, "With the agent stopped (SIGTERM), the BGP host withdrew its routes (the router's route lost it %s after the Pod's deletion, p50) and kept forwarding while the router moved its flows: %d new connections failed in %d trials; for the L2 address, which the stopping agent hands over through memberlist, %d failed.\n",
			seconds(percentile(bgpMoved, 50)), bgpFailed, len(bgp.trials), l2failed)
	}
	return b.String()
}

func bgpThroughputTable(res bgpResults) string {
	if len(res.runs) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n### Throughput: both hosts announcing (ECMP) vs one\n\n")
	fmt.Fprintf(&b, "wrk from the client behind the router to the BGP address, %d rounds of %s per row, each round measuring %d hosts and 1 host one after the other; requests/s: the median and the range of the rounds; ratio: the median over the rounds of the round's requests/s with %d hosts over those with 1 host; p99: the median of the rounds' p99; packets: what each load-balancer host's link received and sent, summed over the rounds; busy cores: the whole machine's busy CPU time per second of load.\n\n",
		res.cfg.rounds, res.cfg.duration, lbHosts, lbHosts)
	b.WriteString("| load | hosts announcing | requests/s | rounds' range | ratio to 1 host | p99 | packets per load-balancer host | busy cores |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	var ratios []string
	for _, mode := range []string{modeKeepAlive, modeClose} {
		per := ecmpRatios(res.runs, mode, lbHosts)
		for _, n := range []int{lbHosts, 1} {
			s := summarizeECMP(res.runs, mode, n)
			ratio := "1"
			if n != 1 {
				ratio = fmt.Sprintf("%.2f", median(per))
				var rounds []string
				for _, r := range per {
					rounds = append(rounds, fmt.Sprintf("%.2f", r))
				}
				ratios = append(ratios, fmt.Sprintf("%s with %s (rounds: %s)", ratio, modeName(mode), strings.Join(rounds, ", ")))
			}
			fmt.Fprintf(&b, "| %s | %d | %.0f | %.0f-%.0f | %s | %s | %s (%s) | %.2f of %d |\n", modeName(mode), n, s.rps, s.min, s.max, ratio,
				s.p99.Round(10*time.Microsecond), shares(s.packets), packetCounts(s.packets), s.cores, numCPU())
		}
	}
	fmt.Fprintf(&b, "\nRequests/s with %d hosts over 1 host: %s. ", lbHosts, strings.Join(ratios, "; "))
	fmt.Fprintf(&b, "The router spreads the flows over both hosts (packets column; with keep-alive only %d connections are hashed, so the split is coarser), but on this machine every host of the test bed (client, router, both load-balancer hosts, workers, Pods, the control plane) shares the same %d cores, which the load keeps busy (busy cores column): a second load-balancer host adds no CPU here. The ratio therefore says what ECMP costs or saves on one machine, within the noise of a shared machine (rounds' range), not the capacity a second machine would add; where the load-balancer host is the bottleneck and the hosts are separate machines, each forwards only its share of the packets.\n", res.cfg.conns, numCPU())
	return b.String()
}

func modeName(mode string) string {
	if mode == modeClose {
		return "connection per request"
	}
	return "keep-alive"
}

func packetCounts(packets []uint64) string {
	var out []string
	for _, p := range packets {
		out = append(out, fmt.Sprint(p))
	}
	return strings.Join(out, " / ")
}

// frrVersion is bgpd's version line ("FRR bgpd version 8.4.4").
func frrVersion() string {
	v, _ := exec.Command(frr.BGPD, "--version").CombinedOutput()
	line, _, _ := strings.Cut(string(v), "\n")
	if strings.HasPrefix(line, "bgpd version ") {
		return "FRR " + line + " (Debian package)"
	}
	return "FRR (version unknown)"
}

const bgpMethod = `
### Method

- Topology: the real cluster (test/framework/realcluster), as in the Failover
  section: 2 dedicated load-balancer hosts running the agent DaemonSet
  from deploy/ (plus ` + "`--ownership-hold-down=3s`" + `, which only shortens
  the return between L2 trials), 2 workers with one groundcloud-echo Pod
  each; and two hosts that are not nodes: FRR 8 (zebra, bfdd and bgpd) as
  the router ("frr", realcluster.StartFRR) and the client. Every load-balancer
  host peers with the router (eBGP, AS 64513 to AS 64512) with a hold time
  of 3 s and keepalives every 1 s (the least hold time BGP allows; the
  router's ` + "`timers 1 3`" + `); the router installs up to 8 equal paths
  and hashes flows over them by addresses and ports
  (fib_multipath_hash_policy 1, in its own namespace). The client's route
  to the BGP pool (198.51.100.0/28, outside the hosts' subnet) goes through
  the router; the nodes answer the client directly (passthrough).
- Services: "bgp" in pool "bgp" (` + "`announce = bgp`" + `, hosts labelled
  example.net/bgp=true: both), "l2" in the default pool (announced on the
  link, one holder elected by memberlist); both passthrough forwarding,
  externalTrafficPolicy Cluster, TCP port 80 to the Pods' line echo; "bgp"
  also port 8080 to their HTTP server (the load).
- Failover: the measuring client of the Failover section (a new TCP
  connection every 20 ms, each successful when greeted by a Pod within
  500 ms; 4 long-lived connections pinged every 100 ms). Faults on one
  load-balancer host: for L2 the one holding the address, for BGP lb-1 and
  lb-2 in turn (both announce it). sigterm deletes the host's agent Pod
  (SIGTERM: the agent withdraws its routes, keeps forwarding for
  ` + "`--bgp-withdraw-wait`" + ` (3 s), then stops; the DaemonSet creates a new
  Pod); kill-9 sends SIGKILL to the agent's container (its routes go with
  its BGP session, which the host's kernel closes; its rules stay and keep
  forwarding; the kubelet restarts it); link-down sets the host's link
  down (a dead host or a pulled cable: the router notices when the hold
  timer expires, or with BFD after its detection time). Gap and recovered as in the Failover section; moved:
  from the fault until the router's route (BGP) no longer had the host as
  a next hop, or until another host held the address (L2); "of those
  started while failing": failed new connections over those started from
  the fault until the recovery (and those in flight at the fault that
  failed), the share of new flows the fault hit (all of them for L2; with
  ECMP those hashed to the failed host, about half).
- Throughput: wrk 4.1 from the client, 3 threads, 48 connections,
  keep-alive or ` + "`Connection: close`" + ` (a new connection per request),
  GET of a short answer from the Pods' HTTP server on port 8080 of the BGP
  address, announced by both hosts, then by lb-1 only (lb-2's label
  removed: it withdraws; the load starts once the router's route has
  settled for 1 s), the order alternating from round to round. Packets per
  host: each load-balancer host's link counters (received plus sent)
  around each load; the nodes' replies do not cross them.
- BFD (rows "bgp+bfd"): measured last, after the throughput rows: the
  router runs BFD with the hosts of its IPv4 sessions (a bfdd profile of
  100 ms transmit and receive intervals, multiplier 3, and ` + "`neighbor LB bfd`" + `;
  realcluster.EnableBFD), and the cloud-config's IPv4 peer gets ` + "`bfd = true`" + `
  with the same timers (realcluster.BGPPeersBFD), the agents restarted to
  read it; then the same faults on the same address.
- Reproduce: ` + "`make bench`" + ` or ` + "`hack/bench.sh TestBGPBenchmark`" + ` (as root;
  GROUNDCLOUD_BENCH_TRIALS=n changes the number of failover trials, 5 by
  default here; GROUNDCLOUD_BENCH_ROUNDS and GROUNDCLOUD_BENCH_DURATION
  the load's rounds, 5 by default here, and length).
`

func TestSummarizeECMP(t *testing.T) {
	run := func(mode string, hosts, round int, rps float64, p1, p2 uint64) ecmpRun {
		return ecmpRun{
			dpRun:   dpRun{mode: mode, round: round, rps: rps, requests: int(rps * 5), p99: time.Duration(round) * time.Millisecond, cpu: 10 * time.Second},
			hosts:   hosts,
			perHost: []linkCounters{{packets: p1}, {packets: p2}},
		}
	}
	runs := []ecmpRun{
		run(modeKeepAlive, 2, 1, 1000, 60, 40),
		run(modeKeepAlive, 2, 2, 3000, 50, 50),
		run(modeKeepAlive, 2, 3, 2000, 40, 60),
		run(modeKeepAlive, 1, 1, 500, 100, 0),
		run(modeClose, 2, 1, 9, 1, 1),
	}
	got := summarizeECMP(runs, modeKeepAlive, 2)
	want := ecmpSummary{rps: 2000, min: 1000, max: 3000, p99: 2 * time.Millisecond, packets: []uint64{150, 150}, cores: 2}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(ecmpSummary{})); diff != "" {
		t.Errorf("summarizeECMP (-want +got):\n%s", diff)
	}
	if got := shares(got.packets); got != "lb-1 50 % / lb-2 50 %" {
		t.Errorf("shares = %q", got)
	}
	if got := summarizeECMP(runs, modeClose, 1); got.rps != 0 || got.packets != nil {
		t.Errorf("no runs: %+v", got)
	}
	// Round 1 has both; rounds 2 and 3 lack a 1-host run.
	if diff := cmp.Diff([]float64{2}, ecmpRatios(runs, modeKeepAlive, 2)); diff != "" {
		t.Errorf("ecmpRatios (-want +got):\n%s", diff)
	}
	if got := ecmpRatios(runs, modeClose, 2); got != nil {
		t.Errorf("ecmpRatios without 1-host runs = %v", got)
	}
}

func TestFailedShare(t *testing.T) {
	tests := []struct {
		name   string
		trials []trial
		want   float64
	}{
		{name: "none failed", trials: []trial{{}, {}}, want: 0},
		{name: "half of the flows", trials: []trial{
			{outage: outage(30), affected: 50},
			{outage: outage(20), affected: 50},
		}, want: 0.5},
		{name: "all", trials: []trial{{outage: outage(40), affected: 40}}, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (scenario{trials: tt.trials}).failedShare(); got != tt.want {
				t.Errorf("failedShare = %v, want %v", got, tt.want)
			}
		})
	}
}

func outage(failed int) availability.Outage { return availability.Outage{Failed: failed} }

func TestAffected(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	fail := errors.New("timeout")
	// One attempt every 100 ms from 0 to 1900 ms; the fault at 1000 ms.
	attempts := func(failed ...int) []availability.Attempt {
		var out []availability.Attempt
		for m := 0; m < 2000; m += 100 {
			a := availability.Attempt{Start: ms(m)}
			if slices.Contains(failed, m) {
				a.Err = fail
			}
			out = append(out, a)
		}
		return out
	}
	tests := []struct {
		name      string
		attempts  []availability.Attempt
		recovered time.Time
		want      int
	}{
		{name: "after the fault until the recovery", attempts: attempts(1000, 1100), recovered: ms(1200), want: 2},
		{name: "in flight and failed", attempts: attempts(900, 1000), recovered: ms(1100), want: 2},
		{name: "before the fault, answered", attempts: attempts(1100), recovered: ms(1300), want: 3},
		{name: "failed before from", attempts: attempts(300, 1000), recovered: ms(1100), want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := affected(tt.attempts, ms(500), ms(1000), tt.recovered); got != tt.want {
				t.Errorf("affected = %d, want %d", got, tt.want)
			}
		})
	}
}

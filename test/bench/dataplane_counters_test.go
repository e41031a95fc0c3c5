package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/groundcloud/groundcloud/test/framework/netlab"
	"github.com/groundcloud/groundcloud/test/framework/realcluster"
)

// Settings of the agent's --traffic-counters the counters benchmark
// compares: the default (every counter) and none.
const (
	countersOn  = "node"
	countersOff = "none"
)

// counterRun is one measurement of the counters benchmark.
type counterRun struct {
	dpRun
	counters string
}

// TestDataPlaneCountersBenchmark measures what the agent's traffic
// counters (docs/agent.md, "Traffic per address") cost: the data-plane
// benchmark's proxy and passthrough paths, keep-alive HTTP and UDP, with
// the agent's --traffic-counters at node (every counter) and at none, side
// by side. Each round sets the flag on the load-balancer host's agent (a
// rollout of its DaemonSet; the order alternates between rounds) and
// measures both paths. See docs/benchmarks.md, section "Traffic counters".
func TestDataPlaneCountersBenchmark(t *testing.T) {
	skipUnlessBench(t)
	start := time.Now()
	requireDataPlaneTools(t)
	cfg := dataPlaneConfig()
	c := realcluster.StartT(t, realcluster.Options{
		Topology: netlab.Topology{LBHosts: 1, Clients: []string{"client", "router"}},
		Workers:  2,
	})
	bed := newDPBed(c)
	targets := bed.targets(deployDataPlane(t, bed))
	paths := []string{pathProxy, pathPassthrough}

	var runs []counterRun
	for r := range cfg.rounds {
		for _, setting := range rotate([]string{countersOn, countersOff}, r) {
			setAgentTrafficCounters(t, c, setting)
			for _, p := range paths {
				checkPath(t, bed, targets[p])
				_, err := runWrk(t, bed.client, targets[p], cfg, modeKeepAlive, time.Second) // warm-up
				must(t, err)
			}
			for _, p := range rotate(paths, r) {
				for _, mode := range []string{modeKeepAlive, modeUDP} {
					run, err := measure(targets[p], func() (dpRun, error) {
						if mode == modeUDP {
							return runUDP(t.Context(), bed.client, targets[p], cfg.udpSenders, cfg.duration)
						}
						return runWrk(t, bed.client, targets[p], cfg, mode, cfg.duration)
					})
					must(t, err)
					run.round = r + 1
					t.Logf("round %d counters=%-4s %-9s %-11s %9.0f req/s  p99 %s  errors %d",
						run.round, setting, run.mode, run.path, run.rps, run.p99, run.errors)
					runs = append(runs, counterRun{dpRun: run, counters: setting})
				}
			}
		}
	}
	setAgentTrafficCounters(t, c, countersOn)
	lines := counterLines(runs, cfg.rounds, paths)
	for _, l := range lines {
		fmt.Println(l)
	}
	if path := os.Getenv("GROUNDCLOUD_BENCH_DOCS"); path != "" && !t.Failed() {
		must(t, writeSection(path, "## Traffic counters", countersSection(lines, runs, paths, cfg, time.Since(start))))
		t.Logf("wrote the Traffic counters section of %s", path)
	}
}

// setAgentTrafficCounters sets --traffic-counters of the agent DaemonSet
// and waits until its Pods run the new setting.
func setAgentTrafficCounters(t *testing.T, c *realcluster.Cluster, setting string) {
	t.Helper()
	ctx := t.Context()
	dss := c.Client.AppsV1().DaemonSets(metav1.NamespaceSystem)
	ds, err := dss.Get(ctx, "groundcloud-agent", metav1.GetOptions{})
	must(t, err)
	const flag = "--traffic-counters="
	for i := range ds.Spec.Template.Spec.Containers {
		ct := &ds.Spec.Template.Spec.Containers[i]
		if ct.Name != "agent" {
			continue
		}
		args := slices.DeleteFunc(slices.Clone(ct.Args), func(a string) bool { return strings.HasPrefix(a, flag) })
		if slices.Equal(append(args, flag+setting), ct.Args) {
			return
		}
		ct.Args = append(args, flag+setting)
	}
	updated, err := dss.Update(ctx, ds, metav1.UpdateOptions{})
	must(t, err)
	err = wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := dss.Get(ctx, updated.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s := got.Status
		return s.ObservedGeneration >= updated.Generation && s.UpdatedNumberScheduled == s.DesiredNumberScheduled &&
			s.NumberAvailable == s.DesiredNumberScheduled, nil
	})
	must(t, err)
}

// counterSummary is the median req/s of one path and mode at one setting.
func counterSummary(runs []counterRun, path, mode, setting string) (rps float64) {
	var v []float64
	for _, r := range runs {
		if r.path == path && r.mode == mode && r.counters == setting {
			v = append(v, r.rps)
		}
	}
	return medianFloat(v)
}

// counterRatio is the median over rounds of the round's req/s with the
// counters on over that without.
func counterRatio(runs []counterRun, rounds int, path, mode string) float64 {
	var v []float64
	for round := 1; round <= rounds; round++ {
		var on, off float64
		for _, r := range runs {
			if r.path == path && r.mode == mode && r.round == round {
				if r.counters == countersOn {
					on = r.rps
				} else {
					off = r.rps
				}
			}
		}
		if on > 0 && off > 0 {
			v = append(v, on/off)
		}
	}
	return medianFloat(v)
}

// counterLines are the BENCH lines: one per path and mode.
func counterLines(runs []counterRun, rounds int, paths []string) []string {
	var out []string
	for _, p := range paths {
		for _, mode := range []string{modeKeepAlive, modeUDP} {
			out = append(out, fmt.Sprintf("BENCH dataplane-counters path=%s mode=%s rounds=%d rps_counters_node=%.0f rps_counters_none=%.0f on_over_off=%.3f",
				p, mode, rounds, counterSummary(runs, p, mode, countersOn), counterSummary(runs, p, mode, countersOff), counterRatio(runs, rounds, p, mode)))
		}
	}
	return out
}

// countersSection is the "Traffic counters" section of docs/benchmarks.md.
func countersSection(lines []string, runs []counterRun, paths []string, cfg dpConfig, elapsed time.Duration) string {
	var b strings.Builder
	b.WriteString("## Traffic counters\n\nWritten by `TestDataPlaneCountersBenchmark` (test/bench/dataplane_counters_test.go): the data-plane\n")
	b.WriteString("benchmark's proxy and passthrough paths with the agent's `--traffic-counters` at `node` (every counter)\n")
	fmt.Fprintf(&b, "and at `none`, %d rounds of %s per row, the setting's order alternating between rounds. Goal: at most 2 %% fewer requests/s.\n\n", cfg.rounds, cfg.duration)
	b.WriteString("| path | load | req/s, counters | req/s, no counters | counters / none (median of rounds) | goal |\n|---|---|---|---|---|---|\n")
	for _, p := range paths {
		for _, mode := range []string{modeKeepAlive, modeUDP} {
			ratio := counterRatio(runs, cfg.rounds, p, mode)
			verdict := "met"
			if ratio < 0.98 {
				verdict = "missed"
			}
			fmt.Fprintf(&b, "| %s | %s | %.0f | %.0f | %.3f | %s |\n", p, mode,
				counterSummary(runs, p, mode, countersOn), counterSummary(runs, p, mode, countersOff), ratio, verdict)
		}
	}
	fmt.Fprintf(&b, "\nTook %s.\n\n### Raw numbers\n\n```\n%s\n```\n", elapsed.Round(time.Second), strings.Join(lines, "\n"))
	return b.String()
}

// TestCountersReport: the ratio pairs the settings of each round.
func TestCountersReport(t *testing.T) {
	run := func(round int, setting string, rps float64) counterRun {
		return counterRun{dpRun: dpRun{path: pathProxy, mode: modeUDP, round: round, rps: rps}, counters: setting}
	}
	runs := []counterRun{
		run(1, countersOn, 98), run(1, countersOff, 100),
		run(2, countersOff, 50), run(2, countersOn, 50), // a slow round
		run(3, countersOn, 90), run(3, countersOff, 100),
	}
	if got := counterRatio(runs, 3, pathProxy, modeUDP); got != 0.98 {
		t.Errorf("counterRatio = %v, want 0.98 (the median of 0.98, 1, 0.9)", got)
	}
	if got := counterSummary(runs, pathProxy, modeUDP, countersOff); got != 100 {
		t.Errorf("counterSummary = %v, want 100", got)
	}
}

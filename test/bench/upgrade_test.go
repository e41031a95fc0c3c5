package bench

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/groundcloud/groundcloud/internal/annotation"
	"github.com/groundcloud/groundcloud/test/framework/availability"
	"github.com/groundcloud/groundcloud/test/framework/controlplane"
	"github.com/groundcloud/groundcloud/test/framework/frr"
	"github.com/groundcloud/groundcloud/test/framework/realcluster"
)

// upgradeRounds is the default number of rounds of the upgrade benchmark
// (each: the previous release's rolling update, the upgrade, this
// version's rolling update, the downgrade).
const upgradeRounds = 2

// Operations of the upgrade benchmark, in the order of a round.
const (
	opRollPrevious = "agents' rolling update, previous release"
	opSoloPrevious = "lb-1's agent Pod deleted (SIGTERM), previous release"
	opUpgrade      = "upgrade (the previous release's agents stop)"
	opRollCurrent  = "agents' rolling update, this version"
	opSoloCurrent  = "lb-1's agent Pod deleted (SIGTERM), this version"
	opDowngrade    = "downgrade (this version's agents stop)"
)

var upgradeOps = []string{opRollPrevious, opSoloPrevious, opUpgrade, opRollCurrent, opSoloCurrent, opDowngrade}

// soloLabel selects lb-1 alone for pool "solo" (soloPoolOf): its address
// has no other host, as with a single load-balancer host.
const soloLabel = "node-restriction.kubernetes.io/solo"

// The Services the upgrade benchmark keeps traffic on, by their rows.
const (
	upL2        = "L2 passthrough"
	upL2Proxy   = "L2 proxy"
	upBGP       = "BGP passthrough (ECMP, 2 hosts)"
	upSolo      = "L2 passthrough, lb-1 alone"
	upgradeHold = 10 * time.Second // deploy/'s --ownership-hold-down
)

var upgradeServices = []string{upL2, upL2Proxy, upBGP, upSolo}

// upgradeKey names a Service of upgradeServices in Kubernetes and in the
// BENCH lines.
var upgradeKey = map[string]string{upL2: "l2-passthrough", upL2Proxy: "l2-proxy", upBGP: "bgp-passthrough", upSolo: "solo"}

// upgradeOp is one operation of a round: what it cost each Service's
// traffic (a trial of the failover benchmark's kind: outage, broken and
// held long-lived connections), and the apiserver writes meanwhile.
type upgradeOp struct {
	name   string
	took   time.Duration
	trials map[string]trial
	writes writes
}

// TestUpgradeBenchmark measures, on the real cluster with 2 dedicated
// load-balancer hosts, FRR as the router and a client behind it, what the
// upgrade from the previous release (realcluster.PreviousRelease) to this
// version and the downgrade back cost the traffic of an L2 passthrough, an
// L2 proxy and a BGP passthrough Service (a new connection every 20 ms,
// four held), and what the apiserver was written meanwhile; beside them,
// the agents' rolling update (kubectl rollout restart) of each release on
// the same cluster. The steps are docs/install.md's (kubectl apply -k,
// hosts labelled with the new key first, the old one removed after). See
// docs/benchmarks.md, section "Upgrades and downgrades".
func TestUpgradeBenchmark(t *testing.T) {
	skipUnlessBench(t)
	start := time.Now()
	must(t, frr.Available())
	ctx := t.Context()
	repo, err := controlplane.RepoRoot()
	must(t, err)
	dir := t.TempDir()
	prevTree := filepath.Join(dir, "previous")
	_, err = realcluster.PreviousReleaseTree(ctx, repo, prevTree, true)
	must(t, err)
	current, err := realcluster.BuildRelease(ctx, repo, filepath.Join(dir, "current-images"))
	must(t, err)
	rounds := benchTrials(upgradeRounds)

	b, _, _ := startBGPBenchFrom(t, prevTree, func(c *realcluster.Cluster) string {
		return bgpBenchConfig(c, false) + soloPoolOf(c, soloLabel)
	})
	setLabel(t, b.c, b.lbs[0].Name, soloLabel, true)
	if got := b.c.HostLabel(); got != realcluster.PreviousHostLabel {
		t.Fatalf("the previous release places its agents on %s, want %s", got, realcluster.PreviousHostLabel)
	}
	previous := realcluster.Release{Repo: prevTree, ControllerManager: b.c.Images.ControllerManager, Agent: b.c.Images.Agent, Router: b.c.Images.Router}
	b.deployEcho(t, "upgrade")
	lines := v1.ServicePort{Name: "lines", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(realcluster.EchoLinesPort)}
	vips := map[string]netip.Addr{}
	for _, name := range upgradeServices {
		svc := echoService(upgradeKey[name], "upgrade", lines)
		switch name {
		case upL2Proxy:
			svc.Annotations[annotation.Forwarding] = "proxy"
		case upBGP:
			svc.Annotations[annotation.Pool] = "bgp"
		case upSolo:
			svc.Annotations[annotation.Pool] = "solo"
		}
		vips[name] = b.loadBalancer(t, svc)
	}
	must(t, b.c.WaitDeploymentReady(ctx, "default", "upgrade"))
	for _, v := range vips {
		waitAnswers(t, b.client, v)
	}

	sigterm := func(t *testing.T) {
		f := b.sigterm()
		f.inject(t, 0)
		f.restore(t, 0)
	}
	steps := map[string]func(t *testing.T){
		opRollPrevious: func(t *testing.T) { restartWorkload(t, b.c, "DaemonSet", "groundcloud-agent") },
		opSoloPrevious: sigterm,
		opSoloCurrent:  sigterm,
		opUpgrade: func(t *testing.T) {
			must(t, b.c.Install(t.Context(), current))
			must(t, b.c.RemoveHostLabel(t.Context(), realcluster.PreviousHostLabel))
		},
		opRollCurrent: func(t *testing.T) { restartWorkload(t, b.c, "DaemonSet", "groundcloud-agent") },
		opDowngrade: func(t *testing.T) {
			must(t, b.c.Install(t.Context(), previous))
			must(t, b.c.RemoveHostLabel(t.Context(), annotation.LoadBalancerHostLabel))
		},
	}
	var ops []upgradeOp
	t.Run("rounds", func(t *testing.T) {
		time.Sleep(upgradeHold + 2*time.Second) // every host serving
		for round := range rounds {
			for _, name := range upgradeOps {
				op := b.upgradeOp(t, name, vips, steps[name])
				t.Logf("round %d: %s", round+1, op.log())
				ops = append(ops, op)
			}
		}
	})
	for _, name := range upgradeOps {
		fmt.Println(upgradeLine(name, ops))
	}
	if path := os.Getenv("GROUNDCLOUD_BENCH_DOCS"); path != "" && !t.Failed() {
		must(t, writeSection(path, "## Upgrades and downgrades", upgradeSection(ops, rounds, time.Since(start))))
	}
}

// upgradeOp runs step with a fresh client of every Service (a new
// connection every 20 ms, four held), measured from 0.5 s before the step
// until the last host's hold-down after it is over.
func (b *bench) upgradeOp(t *testing.T, name string, vips map[string]netip.Addr, step func(*testing.T)) upgradeOp {
	t.Helper()
	ctx := t.Context()
	clients := map[string]*availability.Client{}
	for _, svc := range upgradeServices {
		c, err := availability.Start(ctx, availability.Options{From: b.client, To: netip.AddrPortFrom(vips[svc], 80)})
		must(t, err)
		clients[svc] = c
	}
	time.Sleep(2 * time.Second) // the held connections open
	before, err := readWrites(ctx, b.c.Client)
	must(t, err)
	began := time.Now()
	step(t)
	op := upgradeOp{name: name, took: time.Since(began), trials: map[string]trial{}}
	time.Sleep(upgradeHold + 3*time.Second) // the last host's take-back after its hold-down
	after, err := readWrites(ctx, b.c.Client)
	must(t, err)
	op.writes = after.minus(before)
	for _, svc := range upgradeServices {
		c := clients[svc]
		tr := trial{outage: availability.Measure(c.Attempts(), began, began.Add(-500*time.Millisecond), time.Now().Add(-time.Second))}
		for _, conn := range c.Conns() {
			tr.held++
			if conn.Err != nil {
				tr.broken++
			}
		}
		c.Stop()
		op.trials[svc] = tr
	}
	return op
}

func (op upgradeOp) log() string {
	var parts []string
	for _, svc := range upgradeServices {
		tr := op.trials[svc]
		parts = append(parts, fmt.Sprintf("%s %d/%d failed, gap %s, %d/%d held broken", svc, tr.outage.Failed, tr.outage.Attempts, ms(tr.outage.Gap), tr.broken, tr.held))
	}
	return fmt.Sprintf("%s in %s: %s; writes %s", op.name, op.took.Round(time.Second), strings.Join(parts, "; "), op.writes)
}

// upgradeTotals sums the rounds of one operation for one Service.
func upgradeTotals(name, svc string, ops []upgradeOp) (restartTotals, int) {
	var rounds scenario
	for _, op := range ops {
		if op.name == name {
			rounds.trials = append(rounds.trials, op.trials[svc])
		}
	}
	return totalsOf(rounds), len(rounds.trials)
}

// upgradeWrites sums the rounds' writes of one operation.
func upgradeWrites(name string, ops []upgradeOp) (w writes, took time.Duration) {
	w = writes{}
	for _, op := range ops {
		if op.name != name {
			continue
		}
		for k, n := range op.writes {
			w[k] += n
		}
		took = max(took, op.took)
	}
	return w, took
}

// upgradeLine is an operation as a BENCH line.
func upgradeLine(name string, ops []upgradeOp) string {
	var b strings.Builder
	fmt.Fprintf(&b, "BENCH upgrade op=%q", name)
	for _, svc := range upgradeServices {
		tot, n := upgradeTotals(name, svc, ops)
		key := strings.ReplaceAll(upgradeKey[svc], "-", "_")
		fmt.Fprintf(&b, " %s_failed=%d %s_attempts=%d %s_gap_max_s=%.2f %s_broken=%d %s_held=%d", key, tot.failed, key, tot.attempts, key, tot.max.Seconds(), key, tot.broken, key, tot.held)
		if svc == upgradeServices[0] {
			fmt.Fprintf(&b, " rounds=%d", n)
		}
	}
	w, _ := upgradeWrites(name, ops)
	fmt.Fprintf(&b, " lb_writes=%d service_status_writes=%d events=%d", w.loadBalancers(), w["services/status"], w["events"])
	return b.String()
}

func upgradeSection(ops []upgradeOp, rounds int, took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, `## Upgrades and downgrades

What the upgrade from the previous release to this version and the downgrade back cost, beside the
agents' rolling update of each release and the restart of the agent of an address's only host, on the
same cluster: for the traffic of four Services, and in writes to the apiserver. Written by `+"`make bench`"+` (`+"`TestUpgradeBenchmark`"+`) on %s (%d rounds, %s for
the whole benchmark, cluster start included); not a pass/fail test. Goal (issue 33): 0 failed new
connections and 0 broken long-lived ones. Upgrading, the previous release's agents stop (and remove
their address and rules, with no other host Ready yet: held L2 passthrough connections reset, L2 proxy
ones fail for the second); downgrading, they start (Ready before their BGP session is up: the other
host withdraws, and the router has no path for 1.5 s; on the host that alone holds an address they
flush the rules the stopped agent left, and its held connections reset). The previous release's own
restarts break every held connection of the address a host holds alone; this version's agents,
stopping and starting in its own rolling update or alone on a host, lose nothing
([upgrading](install.md#upgrading)).

| operation | Service | new connections failed | gap p50 / max | long-lived connections broken |
|---|---|---|---|---|
`, time.Now().UTC().Format("2006-01-02"), rounds, took.Round(time.Second))
	for _, name := range upgradeOps {
		for _, svc := range upgradeServices {
			tot, _ := upgradeTotals(name, svc, ops)
			fmt.Fprintf(&b, "| %s | %s | %d of %d | %.2f s / %.2f s | %d of %d |\n", name, svc, tot.failed, tot.attempts, tot.p50.Seconds(), tot.max.Seconds(), tot.broken, tot.held)
		}
	}
	b.WriteString(`
Writes to the apiserver while each operation ran and settled (all rounds together, from its
` + "`apiserver_request_total`" + `): groundcloud's to LoadBalancer objects and Service status, and every
component's Events (the kubelets', the DaemonSet and Deployment controllers', groundcloud's):

| operation | rolled out in (max) | LoadBalancer writes (spec and status) | Service status writes | Events |
|---|---|---|---|---|
`)
	for _, name := range upgradeOps {
		w, took := upgradeWrites(name, ops)
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d |\n", name, took.Round(time.Second), w.loadBalancers(), w["services/status"], w["events"])
	}
	b.WriteString(`
### Method

- Topology: the real cluster (test/framework/realcluster): 2 dedicated
  load-balancer hosts, 2 workers with groundcloud-echo, FRR as the router
  (3 s hold time, no graceful restart, no BFD) and a client behind it.
  groundcloud installed from the previous release's deploy/ and images
  (` + "`realcluster.PreviousRelease`" + `, the commit the upgrade lane of
  ` + "`make test`" + ` names), with deploy/'s settings (` + "`--ownership-hold-down=10s`" + `).
- Services: one of pool "default" (passthrough, on the link), one of pool
  "default" with ` + "`groundcloud.io/forwarding: proxy`" + `, one of pool "bgp"
  (passthrough, advertised by both hosts: ECMP at the router), one of pool
  "solo" (passthrough, on the link; the pool selects lb-1 alone, labelled
  ` + "`" + soloLabel + "=true`" + `, as with a single load-balancer host), all in
  front of the line echo of both workers.
- Each round, in order: the agents' rolling update (` + "`kubectl rollout restart`" + `
  of DaemonSet groundcloud-agent) on the previous release; lb-1's agent
  Pod deleted (SIGTERM) and its successor Ready; the upgrade as
  docs/install.md says (the hosts labelled with this version's key, this
  version's deploy/ applied through the test bed's overlay, the rollouts
  awaited, the old label removed); the same rolling update and deletion on
  this version; the downgrade by the same steps back.
- Each operation: a fresh client per Service (a new connection every
  20 ms, four held, test/framework/availability), measured from 0.5 s
  before the operation until 13 s after it returned (the last host's
  hold-down over); "gap" is the longest run of failed new connections.
  Writes: the apiserver's write counters from 2 s before to the end.
- Reproduce: ` + "`hack/bench.sh TestUpgradeBenchmark`" + ` (as root, in a clone with
  the history holding the previous release).

` + "```\n")
	for _, name := range upgradeOps {
		b.WriteString(upgradeLine(name, ops) + "\n")
	}
	b.WriteString("```\n")
	return b.String()
}

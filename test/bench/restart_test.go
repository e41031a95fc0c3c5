package bench

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/groundcloud/groundcloud/internal/annotation"
	"github.com/groundcloud/groundcloud/test/framework/availability"
	"github.com/groundcloud/groundcloud/test/framework/frr"
	"github.com/groundcloud/groundcloud/test/framework/netlab"
	"github.com/groundcloud/groundcloud/test/framework/realcluster"
)

// restartTrials is the default number of agent restarts per row.
const restartTrials = 3

// Rows of the restart benchmark.
const (
	restartL2Two      = "L2 passthrough, 2 hosts (handover)"
	restartL2TwoProxy = "L2 proxy, 2 hosts (handover)"
	restartL2One      = "L2 passthrough, 1 host"
	restartBGPOne     = "BGP, 1 host, graceful-restart = false"
	restartBGPOneG    = "BGP, 1 host, graceful-restart = true (with BFD)"
	restartRouter     = "groundcloud-router rolling update (L2 passthrough address)"
	rolloutL2         = "agent rolling update, 2 hosts, L2 passthrough"
	rolloutL2Proxy    = "agent rolling update, 2 hosts, L2 proxy"
)

// TestRestartBenchmark measures what a rolling update of groundcloud's
// components costs: for the agent, on the real cluster with 2 dedicated load-balancer hosts, FRR
// as the router and a client behind it, lb-1's agent Pod is deleted
// (SIGTERM, as a rolling update or `helm upgrade` does) while the client
// opens a new connection every 20 ms and holds four, for an address held
// on the link by either host (the other takes it over), one held on the
// link by lb-1 alone (pool "solo"), and one only lb-1 advertises over BGP,
// without and then with graceful restart; the router's rolling update
// with the same client; and the controller manager's, as the time to an
// address of Services created meanwhile. See docs/benchmarks.md, section
// "Upgrades and restarts".
func TestRestartBenchmark(t *testing.T) {
	skipUnlessBench(t)
	start := time.Now()
	must(t, frr.Available())
	trials := min(benchTrials(restartTrials), restartTrials)
	b, nh, r := startBGPBenchWith(t, func(c *realcluster.Cluster) string {
		return bgpBenchConfig(c, false) + soloPool(c)
	})
	vips := b.deployBGP(t)
	solo := echoService("solo", "bgpbench", v1.ServicePort{Name: "lines", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(realcluster.EchoLinesPort)})
	solo.Annotations[annotation.Pool] = "solo"
	vips["solo"] = b.loadBalancer(t, solo)
	proxy := echoService("l2proxy", "bgpbench", v1.ServicePort{Name: "lines", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(realcluster.EchoLinesPort)})
	proxy.Annotations[annotation.Forwarding] = "proxy"
	vips["l2proxy"] = b.loadBalancer(t, proxy)
	b.setAgentArgs(t, "--ownership-hold-down="+benchHoldDown.String())
	// lb-2 no longer selected by pools "bgp" and "solo": lb-1 alone
	// advertises the one and holds the other.
	b.setHostLabel(t, b.lbs[1].Name, false)
	nh.waitOnly(t, vips[announceBGP], 0, b.lbs[0])
	for _, v := range []netip.Addr{vips[announceBGP], vips[announceL2], vips["solo"], vips["l2proxy"]} {
		waitAnswers(t, b.client, v)
	}

	var rows []scenario
	left := map[string]int{} // restarts in which the address left lb-1, by row
	rowWrites := map[string]writes{}
	// run is b.run, with the apiserver's writes meanwhile (rowWrites).
	run := func(t *testing.T, row string, f fault, vip netip.Addr, w watch, n int) scenario {
		before, err := readWrites(t.Context(), b.c.Client)
		must(t, err)
		s := b.run(t, row, f, vip, w, n)
		after, err := readWrites(t.Context(), b.c.Client)
		must(t, err)
		rowWrites[row] = after.minus(before)
		return s
	}
	watch := func(row string, nh *nexthops, vip netip.Addr) *restartWatch {
		return &restartWatch{b: b, nh: nh, vip: vip, row: row, left: left}
	}
	t.Run("restarts", func(t *testing.T) {
		rows = append(rows,
			run(t, restartL2Two, b.sigterm(), vips[announceL2], b.l2Watch(vips[announceL2]), trials),
			run(t, restartL2TwoProxy, b.sigterm(), vips["l2proxy"], b.l2Watch(vips["l2proxy"]), trials),
			run(t, restartL2One, b.sigterm(), vips["solo"], watch(restartL2One, nil, vips["solo"]), trials),
			run(t, restartBGPOne, b.sigterm(), vips[announceBGP], watch(restartBGPOne, nh, vips[announceBGP]), trials),
		)
		// The agents' rolling update: both hosts in turn, the second
		// stopped as soon as the first's new agent is Ready.
		rollout := fault{
			name: "rollout",
			inject: func(t *testing.T, _ int) {
				restartWorkload(t, b.c, "DaemonSet", "groundcloud-agent")
				time.Sleep(benchHoldDown + time.Second) // the take-back after the last hold-down
			},
			restore: func(*testing.T, int) {},
		}
		rows = append(rows,
			run(t, rolloutL2, rollout, vips[announceL2], &holderWatch{b: b, vip: vips[announceL2]}, trials),
			run(t, rolloutL2Proxy, rollout, vips["l2proxy"], &holderWatch{b: b, vip: vips["l2proxy"]}, trials),
		)
		// Graceful restart (and BFD, as docs/bgp.md advises) on the IPv4
		// session: the router first, then the agents.
		must(t, realcluster.EnableBFD(t.Context(), r))
		conf := strings.Replace(b.c.CloudConfig, realcluster.BGPPeers(b.c.Clients["frr"]), realcluster.BGPPeersBFDGracefulRestart(b.c.Clients["frr"]), 1)
		if conf == b.c.CloudConfig {
			t.Fatal("the cloud-config does not hold the benchmark's peers")
		}
		must(t, b.c.SetCloudConfig(t.Context(), conf))
		nh.waitOnly(t, vips[announceBGP], 2*time.Second, b.lbs[0])
		waitAnswers(t, b.client, vips[announceBGP])
		rows = append(rows, run(t, restartBGPOneG, b.sigterm(), vips[announceBGP], watch(restartBGPOneG, nh, vips[announceBGP]), trials))
		// The router's rolling update: pod routes stay in the kernel.
		router := fault{
			name:    "rollout",
			inject:  func(t *testing.T, _ int) { restartWorkload(t, b.c, "DaemonSet", "groundcloud-router") },
			restore: func(*testing.T, int) {},
		}
		rows = append(rows, run(t, restartRouter, router, vips[announceL2], &holderWatch{b: b, vip: vips[announceL2]}, 1))
	})
	var leader ccmRollout
	t.Run("controller manager", func(t *testing.T) { leader = b.ccmRollout(t) })
	for _, s := range rows {
		fmt.Println(restartLine(s, left, rowWrites[s.impl]))
	}
	fmt.Println(leader.line())
	if path := os.Getenv("GROUNDCLOUD_BENCH_DOCS"); path != "" && !t.Failed() {
		must(t, writeSection(path, "## Upgrades and restarts", restartSection(rows, left, rowWrites, leader, time.Since(start))))
	}
}

// soloPool is pool "solo": four addresses of the lab's subnet, held on the
// link by the hosts labelled bgpHostLabel=true.
func soloPool(c *realcluster.Cluster) string {
	return soloPoolOf(c, bgpHostLabel)
}

// soloPoolOf is pool "solo" held by the hosts labelled label=true.
func soloPoolOf(c *realcluster.Cluster, label string) string {
	return fmt.Sprintf("[Pool \"solo\"]\naddresses = %s\nauto-assign = false\nhosts = %s=true\n\n",
		netlab.RangeIn(c.Opts.Subnet4, 220, 223), label)
}

// restartWatch follows an address lb-1 alone serves, held on the link (nh
// nil) or advertised over BGP: every trial restarts lb-1's agent, and
// "moved" waits until the next agent runs and has served for 2 s, so that
// the trial measures the whole restart. A trial counts as moved when the
// address left lb-1 meanwhile (left).
type restartWatch struct {
	b    *bench
	nh   *nexthops
	vip  netip.Addr
	old  types.UID
	row  string
	left map[string]int
}

func (w *restartWatch) settled(t *testing.T, _ int) int {
	t.Helper()
	if w.nh != nil {
		w.nh.waitOnly(t, w.vip, 2*time.Second, w.b.lbs[0])
	} else {
		w.b.settled(t, w.vip, w.b.lbs[0].Name)
	}
	pod, _, err := w.b.c.AgentContainer(t.Context(), w.b.lbs[0].Name)
	must(t, err)
	w.old = pod.UID
	return 0
}

func (w *restartWatch) moved(t *testing.T, i int, since time.Time) time.Duration {
	t.Helper()
	w.b.agentReplaced(t, i, w.old)
	time.Sleep(2 * time.Second)
	name := w.b.lbs[i].Name
	var changes []availability.Change
	if w.nh != nil {
		changes = w.nh.changesOf(w.vip, since)
	} else {
		changes = w.b.holders.Changes(w.vip, since)
	}
	if slices.ContainsFunc(changes, func(c availability.Change) bool { return !slices.Equal(c.Hosts, []string{name}) }) {
		w.left[w.row]++
	}
	return 0
}

// restartTotals sums a row's trials: failed and attempted new
// connections, broken and held long-lived ones, and the gaps' median and
// maximum.
type restartTotals struct {
	failed, attempts, broken, held int
	p50, max                       time.Duration
}

func totalsOf(s scenario) restartTotals {
	var r restartTotals
	var gaps []time.Duration
	for _, tr := range s.trials {
		r.failed += tr.outage.Failed
		r.attempts += tr.outage.Attempts
		r.broken += tr.broken
		r.held += tr.held
		gaps = append(gaps, tr.outage.Gap)
	}
	slices.Sort(gaps)
	if len(gaps) > 0 {
		r.p50, r.max = gaps[len(gaps)/2], gaps[len(gaps)-1]
	}
	return r
}

// restartLine is a row as a BENCH line, w the apiserver's writes during
// its trials.
func restartLine(s scenario, left map[string]int, w writes) string {
	r := totalsOf(s)
	return fmt.Sprintf("BENCH restart scenario=%q trials=%d failed=%d attempts=%d gap_p50_s=%.2f gap_max_s=%.2f long_lived_broken=%d long_lived=%d left_host=%d lb_writes=%d service_status_writes=%d events=%d",
		s.impl, len(s.trials), r.failed, r.attempts, r.p50.Seconds(), r.max.Seconds(), r.broken, r.held, left[s.impl], w.loadBalancers(), w["services/status"], w["events"])
}

func restartSection(rows []scenario, left map[string]int, rowWrites map[string]writes, leader ccmRollout, took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, `## Upgrades and restarts

What a rolling update of groundcloud's components costs: the agent's (its Pod deleted: SIGTERM, as
`+"`kubectl rollout restart`"+`, `+"`helm upgrade`"+` and a drain do) for the traffic of lb-1's addresses, for each
way an address can be served; the router's, for the traffic of an address; the controller manager's,
for Services created meanwhile. Written by `+"`make bench`"+` (`+"`TestRestartBenchmark`"+`) on %s (%s for the whole
benchmark, cluster start included); not a pass/fail test. Goal (issue 33): 0 failed new
connections and 0 broken long-lived ones in every row.

| scenario | restarts | new connections failed | gap p50 / max | long-lived connections broken | the address left lb-1 | LoadBalancer / Service status writes, Events |
|---|---|---|---|---|---|---|
`, time.Now().UTC().Format("2006-01-02"), took.Round(time.Second))
	for _, s := range rows {
		r := totalsOf(s)
		moved := fmt.Sprintf("in %d of %d restarts", left[s.impl], len(s.trials))
		switch s.impl {
		case restartL2Two, restartL2TwoProxy:
			moved = "every time (handed over)"
		case rolloutL2, rolloutL2Proxy:
			moved = "every time (each host's agent restarts)"
		case restartRouter:
			moved = "no (its agent is not restarted)"
		}
		w := rowWrites[s.impl]
		fmt.Fprintf(&b, "| %s | %d | %d of %d | %.2f s / %.2f s | %d of %d | %s | %d / %d, %d |\n", s.impl, len(s.trials), r.failed, r.attempts,
			r.p50.Seconds(), r.max.Seconds(), r.broken, r.held, moved, w.loadBalancers(), w["services/status"], w["events"])
	}
	fmt.Fprintf(&b, `
The controller manager's rolling update (`+"`kubectl rollout restart`"+` of its Deployment, two replicas;
its leader hands the Lease over): %d Services created one after the other while it rolled out
(%s), each got its address %s after its creation (p50; at most %s). No data-plane traffic goes
through the controller manager.
`, len(leader.toAddress), leader.took.Round(time.Second), ms(leader.p50()), ms(leader.max()))
	b.WriteString(`
### Method

- Topology: the real cluster (test/framework/realcluster): 2 dedicated
  load-balancer hosts, 2 workers with groundcloud-echo, FRR as the router
  (test/framework/frr, 3 s hold time) and a client behind it; groundcloud
  installed from deploy/, the agents with ` + "`--ownership-hold-down=3s`" + `.
- Addresses: pool "default" on the link, held by either host (the stopping
  agent hands it over through memberlist); pool "solo" on the link and pool
  "bgp" over BGP, both selecting only lb-1 (the hosts labelled
  ` + "`" + bgpHostLabel + "=true`" + `, lb-2's label removed): no other host
  would take or advertise their addresses, as with a single
  load-balancer host. The last row sets ` + "`graceful-restart = true`" + ` and BFD
  (100 ms × 3) on the IPv4 peer (and BFD on the router), the agents
  restarted for it.
- Each restart: lb-1's agent Pod deleted while the client opens a new
  connection every 20 ms and holds four (test/framework/availability);
  measured from 0.5 s before the deletion until the next agent has run for
  2 s; "gap" is the longest run of failed new connections. Writes: the
  apiserver's write counters (` + "`apiserver_request_total`" + `) over all of a
  row's restarts: groundcloud's to LoadBalancer objects (spec and status)
  and to Service status, and every component's Events (the kubelets' for
  the new Pods, the DaemonSet controller's, groundcloud's).
- The agents' rolling update: ` + "`kubectl rollout restart`" + ` of DaemonSet
  groundcloud-agent (both hosts in turn; the DaemonSet stops the second
  host's agent as soon as the first's new one is Ready, still in its
  hold-down) with the same client against the address of pool "default"
  and that of a proxy Service, measured until the last host has taken its
  share back.
- The router's rolling update: ` + "`kubectl rollout restart`" + ` of DaemonSet
  groundcloud-router (every node's in turn) while the same client runs
  against the address of pool "default", measured until it has rolled out.
- The controller manager's: Services of pool "default" created one after
  another (each once the one before had its address, then 1 s) from the
  restart until the Deployment has rolled out.
- Reproduce: ` + "`hack/bench.sh TestRestartBenchmark`" + ` (as root).

Before this benchmark, the scale benchmark measured the same deletion
with one load-balancer host on 2026-12-03, when every stopping agent
removed its addresses and rules: 106 to 131 of 214 to 242 new
connections failed (a gap of 2.2 to 2.9 s). The agents' rolling update,
before the stopping agent handed its addresses to a host in its
hold-down: the upgrade lane's downgrade (the same two dedicated hosts,
docs/install.md "Upgrading") lost 99 to 237 new proxy connections (gaps
of 2 to 5 s), and the previous release's agents still do when they stop
(42 to 51 of about 1,600 upgrading from it); on load-balancer hosts that
are Nodes (test/cluster TestCluster) half the held connections of both
forwardings broke as well.

`)
	b.WriteString("```\n")
	for _, s := range rows {
		b.WriteString(restartLine(s, left, rowWrites[s.impl]) + "\n")
	}
	b.WriteString("```\n")
	return b.String()
}

// holderWatch follows an address held on the link, whoever holds it: a
// fault that restarts no agent (a rollout of another workload) is measured
// on it; "moved" is not used.
type holderWatch struct {
	b   *bench
	vip netip.Addr
}

func (w *holderWatch) settled(t *testing.T, _ int) int {
	t.Helper()
	home := w.b.settled(t, w.vip, "")
	return slices.IndexFunc(w.b.lbs, func(h *netlab.Host) bool { return h.Name == home })
}

func (w *holderWatch) moved(*testing.T, int, time.Time) time.Duration { return 0 }

// ccmRollout is the controller manager's rolling update: how long after
// its creation each Service created meanwhile had its address.
type ccmRollout struct {
	toAddress []time.Duration
	took      time.Duration
}

func (r ccmRollout) p50() time.Duration {
	if len(r.toAddress) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(r.toAddress))
	return s[len(s)/2]
}

func (r ccmRollout) max() time.Duration {
	if len(r.toAddress) == 0 {
		return 0
	}
	return slices.Max(r.toAddress)
}

func (r ccmRollout) line() string {
	return fmt.Sprintf("BENCH restart scenario=\"controller manager rolling update\" services=%d to_address_p50_s=%.2f to_address_max_s=%.2f rollout_s=%.1f",
		len(r.toAddress), r.p50().Seconds(), r.max().Seconds(), r.took.Seconds())
}

// ccmRollout restarts the controller manager's Deployment and creates
// Services of pool "default" one after another until it has rolled out
// (at most 8), then deletes them.
func (b *bench) ccmRollout(t *testing.T) ccmRollout {
	t.Helper()
	var r ccmRollout
	stop := make(chan struct{})
	done := make(chan error, 1)
	svcs := b.c.Client.CoreV1().Services("default")
	go func() { // not the test's goroutine: errors, no Fatal
		for i := 0; i < 8; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			name := fmt.Sprintf("during-%d", i)
			created := time.Now()
			_, err := svcs.Create(t.Context(), echoService(name, "bgpbench", v1.ServicePort{Name: "lines", Protocol: v1.ProtocolTCP, Port: 80,
				TargetPort: intstr.FromInt32(realcluster.EchoLinesPort)}), metav1.CreateOptions{})
			if err == nil {
				_, err = b.c.WaitLoadBalancerIP(t.Context(), "default", name)
			}
			if err != nil {
				done <- fmt.Errorf("Service %s: %w", name, err)
				return
			}
			r.toAddress = append(r.toAddress, time.Since(created))
			time.Sleep(time.Second)
		}
		<-stop
		done <- nil
	}()
	start := time.Now()
	restartWorkload(t, b.c, "Deployment", ccmName)
	r.took = time.Since(start)
	close(stop)
	must(t, <-done)
	for i := range len(r.toAddress) + 1 {
		_ = svcs.Delete(context.Background(), fmt.Sprintf("during-%d", i), metav1.DeleteOptions{})
	}
	t.Logf("controller manager rolled out in %s; %d Services created meanwhile got their addresses in %v", r.took.Round(time.Second), len(r.toAddress), r.toAddress)
	return r
}

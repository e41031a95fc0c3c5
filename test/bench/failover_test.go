package bench

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/groundcloud/groundcloud/internal/annotation"
	"github.com/groundcloud/groundcloud/test/framework/availability"
	"github.com/groundcloud/groundcloud/test/framework/netlab"
	"github.com/groundcloud/groundcloud/test/framework/realcluster"
)

const (
	benchHoldDown = 3 * time.Second // only delays the return between trials
	lbHosts       = 2
)

// daemon is what holds the virtual IP on each LB host: kill crashes it on
// host i (SIGKILL to its process group), restart starts it again.
type daemon struct {
	kill    func(t *testing.T, i int)
	restart func(t *testing.T, i int)
}

type fault struct {
	name    string
	inject  func(t *testing.T, i int)
	restore func(t *testing.T, i int)
}

// trial is one failover.
type trial struct {
	outage   availability.Outage
	takeover time.Duration // until another host held the address
	broken   int           // long-lived connections that broke
	held     int
	// affected are the new connections the fault could fail: started
	// from the fault until the recovery, or in flight when it struck (0
	// when none failed).
	affected int
}

type scenario struct {
	impl, fault string
	trials      []trial
}

// TestFailoverBenchmark measures, on the real cluster, for groundcloud
// (passthrough forwarding, the default, and proxy forwarding) and for
// keepalived with its default timers on the same hosts and data plane, how
// long new connections fail when the load-balancer host holding a virtual
// IP fails, and whether long-lived connections survive. See
// docs/benchmarks.md.
func TestFailoverBenchmark(t *testing.T) {
	skipUnlessBench(t)
	trials := benchTrials(10)
	b := startClusterBench(t, realcluster.Options{
		Topology: netlab.Topology{LBHosts: lbHosts, Clients: []string{"client"}},
		Workers:  2,
	})
	vips := b.deployFailover(t)
	var results []scenario
	t.Run("groundcloud", func(t *testing.T) {
		b.setAgentArgs(t, "--ownership-hold-down="+benchHoldDown.String())
		d := daemon{kill: b.killAgent, restart: b.agentBack}
		for _, impl := range []string{implPassthrough, implProxy} {
			for _, f := range b.faults(d) {
				results = append(results, b.run(t, impl, f, vips[impl], b.l2Watch(vips[impl]), trials))
			}
		}
		// The fast detector: memberlist tuned (fastDetection).
		b.setAgentArgs(t, append([]string{"--ownership-hold-down=" + benchHoldDown.String()}, fastDetection...)...)
		for _, f := range b.faults(d) {
			results = append(results, b.run(t, implFast, f, vips[implPassthrough], b.l2Watch(vips[implPassthrough]), trials))
		}
	})
	t.Run("keepalived", func(t *testing.T) {
		// The agents program the same data plane and hold no address.
		b.setAgentArgs(t, "--vip-ownership=none")
		vip := vips[implPassthrough]
		for _, impl := range []string{implKeepalived, implKeepalivedFast} {
			ka := b.startKeepalived(t, vip, keepalivedTimers[impl])
			d := daemon{
				kill:    func(t *testing.T, i int) { killGroup(t, ka.procs[i]) },
				restart: func(t *testing.T, i int) { ka.start(t, i) },
			}
			for _, f := range b.faults(d) {
				results = append(results, b.run(t, impl, f, vip, b.l2Watch(vip), trials))
			}
			ka.stop()
		}
	})
	for _, s := range results {
		fmt.Println(s.line())
	}
	if path := os.Getenv("GROUNDCLOUD_BENCH_DOCS"); path != "" && !t.Failed() {
		must(t, writeSection(path, "## Failover", failoverSection(t, results, trials)))
		t.Logf("wrote the Failover section of %s", path)
	}
}

// The scenarios: groundcloud by forwarding mode and failure detector,
// keepalived by timers.
const (
	implPassthrough    = "groundcloud"
	implProxy          = "groundcloud-proxy"
	implFast           = "groundcloud-fast"
	implKeepalived     = "keepalived"
	implKeepalivedFast = "keepalived-fast"
)

// fastDetection are the agent flags of the fast failure detector:
// memberlist probing every 50 ms with a 25 ms timeout, and a suspected
// host declared dead after one more probe interval
// (docs/high-availability.md, "Faster failover").
var fastDetection = []string{"--gossip-probe-interval=50ms", "--gossip-probe-timeout=25ms", "--gossip-suspicion-multiplier=1"}

// keepalivedTimers are the VRRP settings of the keepalived scenarios: its
// defaults (VRRPv2, an advertisement a second), and its fastest (VRRPv3,
// an advertisement every centisecond).
var keepalivedTimers = map[string]string{
	implKeepalived:     "advert_int 1",
	implKeepalivedFast: "version 3\n  advert_int 0.01",
}

// bench is a failover test bed: load-balancer hosts, a client, and a
// record of who holds which address.
type bench struct {
	lbs     []*netlab.Host
	client  *netlab.Host
	holders *availability.Holders
	// setLink plugs or pulls load-balancer host i's cable.
	setLink func(i int, up bool) error
	// c is the real cluster (startClusterBench).
	c *realcluster.Cluster
	// restarts are the agents' restart counts before killAgent.
	restarts map[int]int32
}

func (b *bench) watchHolders(t *testing.T) {
	t.Helper()
	holders, err := availability.WatchHolders(b.lbs, 10*time.Millisecond)
	must(t, err)
	b.holders = holders
	t.Cleanup(holders.Stop)
}

// startClusterBench starts the real cluster with opts (the failover
// benchmark's: 2 dedicated load-balancer hosts, 2 workers, a client).
func startClusterBench(t *testing.T, opts realcluster.Options) *bench {
	t.Helper()
	c := realcluster.StartT(t, opts)
	b := &bench{c: c, client: c.Clients["client"]}
	var nodes []*realcluster.Node
	for _, n := range c.Nodes {
		if n.LoadBalancer {
			nodes = append(nodes, n)
			b.lbs = append(b.lbs, n.Host)
		}
	}
	b.setLink = func(i int, up bool) error { return nodes[i].SetLink(up) }
	b.watchHolders(t)
	return b
}

// deployFailover runs groundcloud-echo on both workers and two
// LoadBalancer Services in front of their line echo on port 80, one with
// passthrough forwarding (the pool's default), one with proxy forwarding.
func (b *bench) deployFailover(t *testing.T) map[string]netip.Addr {
	t.Helper()
	b.deployEcho(t, "failover")
	vips := map[string]netip.Addr{}
	for impl, forwarding := range map[string]string{implPassthrough: "passthrough", implProxy: "proxy"} {
		svc := echoService(impl, "failover", v1.ServicePort{Name: "lines", Protocol: v1.ProtocolTCP, Port: 80,
			TargetPort: intstr.FromInt32(realcluster.EchoLinesPort)})
		svc.Annotations[annotation.Forwarding] = forwarding
		vips[impl] = b.loadBalancer(t, svc)
	}
	must(t, b.c.WaitDeploymentReady(t.Context(), "default", "failover"))
	return vips
}

// deployEcho runs groundcloud-echo as Deployment app in namespace
// default, one Pod on each of the two workers.
func (b *bench) deployEcho(t *testing.T, app string) {
	t.Helper()
	d := b.c.EchoDeployment("default", app, 2)
	d.Spec.Template.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: v1.LabelHostname, WhenUnsatisfiable: v1.DoNotSchedule,
		NodeTaintsPolicy: ptr.To(v1.NodeInclusionPolicyHonor),
		LabelSelector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
	}}
	_, err := b.c.Client.AppsV1().Deployments("default").Create(t.Context(), d, metav1.CreateOptions{})
	must(t, err)
}

// echoService is a LoadBalancer Service named name in namespace default in
// front of the Pods of app.
func echoService(name, app string, ports ...v1.ServicePort) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: map[string]string{}},
		Spec: v1.ServiceSpec{
			Type:     v1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": app},
			Ports:    ports,
		},
	}
}

// loadBalancer creates svc on the cluster and returns its address once
// the controller manager has written it.
func (b *bench) loadBalancer(t *testing.T, svc *v1.Service) netip.Addr {
	t.Helper()
	_, err := b.c.Client.CoreV1().Services(svc.Namespace).Create(t.Context(), svc, metav1.CreateOptions{})
	must(t, err)
	vip, err := b.c.WaitLoadBalancerIP(t.Context(), svc.Namespace, svc.Name)
	must(t, err)
	return vip
}

// setAgentArgs gives the agent DaemonSet's container the arguments of
// deploy/ plus extra (an extra --vip-ownership replaces deploy/'s) and
// waits until every agent runs them.
func (b *bench) setAgentArgs(t *testing.T, extra ...string) {
	t.Helper()
	setArgs(t, b.c, "DaemonSet", "groundcloud-agent", extra...)
}

// killAgent crashes the agent's container on load-balancer host i.
func (b *bench) killAgent(t *testing.T, i int) {
	t.Helper()
	name := b.lbs[i].Name
	pod, id, err := b.c.AgentContainer(t.Context(), name)
	must(t, err)
	if b.restarts == nil {
		b.restarts = map[int]int32{}
	}
	b.restarts[i] = pod.Status.ContainerStatuses[0].RestartCount
	must(t, b.c.Node(name).KillContainer(t.Context(), id))
}

// agentBack waits until the kubelet has restarted the agent killed on
// host i and it is ready again.
func (b *bench) agentBack(t *testing.T, i int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		pod, _, err := b.c.AgentContainer(t.Context(), b.lbs[i].Name)
		if err == nil && len(pod.Status.ContainerStatuses) > 0 {
			st := pod.Status.ContainerStatuses[0]
			if st.RestartCount > b.restarts[i] && st.Ready {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent on %s is not back within 3 minutes (%v)", b.lbs[i].Name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// faults are the failures of one trial: the owner's link goes down (a
// dead host, a pulled cable), or the daemon holding the address is killed
// with SIGKILL (the address and the nftables rules stay in its kernel).
func (b *bench) faults(d daemon) []fault {
	return []fault{
		{
			name:    "link-down",
			inject:  func(t *testing.T, i int) { must(t, b.setLink(i, false)) },
			restore: func(t *testing.T, i int) { must(t, b.setLink(i, true)) },
		},
		{name: "kill-9", inject: d.kill, restore: d.restart},
	}
}

// watch follows who serves one address through the trials of a
// scenario.
type watch interface {
	// settled waits until the address is served as before the first
	// trial and returns the load-balancer host that trial n fails.
	settled(t *testing.T, n int) int
	// moved waits until host i no longer serves the address and returns
	// how long after since that was.
	moved(t *testing.T, i int, since time.Time) time.Duration
}

// l2Watch follows an address held by one host on the link: each trial
// fails the host that held it first.
type l2Watch struct {
	b    *bench
	vip  netip.Addr
	home string
}

func (b *bench) l2Watch(vip netip.Addr) *l2Watch { return &l2Watch{b: b, vip: vip} }

func (w *l2Watch) settled(t *testing.T, _ int) int {
	t.Helper()
	w.home = w.b.settled(t, w.vip, w.home)
	return slices.IndexFunc(w.b.lbs, func(h *netlab.Host) bool { return h.Name == w.home })
}

func (w *l2Watch) moved(t *testing.T, i int, since time.Time) time.Duration {
	t.Helper()
	return w.b.takeover(t, w.vip, w.b.lbs[i].Name, since)
}

func (b *bench) run(t *testing.T, impl string, f fault, vip netip.Addr, w watch, trials int) scenario {
	s := scenario{impl: impl, fault: f.name}
	time.Sleep(benchHoldDown + 2*time.Second) // every host serving, or a keepalived master elected
	for n := range trials {
		tr := b.trial(t, f, vip, w, n)
		t.Logf("%s %s trial %d: gap %s, recovered %s, takeover %s, %d/%d attempts failed (of %d it could fail), %d of %d long-lived broken",
			impl, f.name, n+1, ms(tr.outage.Gap), ms(tr.outage.Recovered), ms(tr.takeover), tr.outage.Failed, tr.outage.Attempts, tr.affected, tr.broken, tr.held)
		s.trials = append(s.trials, tr)
	}
	return s
}

// trial fails the host w picks once, measures and restores it.
func (b *bench) trial(t *testing.T, f fault, vip netip.Addr, w watch, n int) trial {
	t.Helper()
	i := w.settled(t, n)
	c, err := availability.Start(t.Context(), availability.Options{From: b.client, To: netip.AddrPortFrom(vip, 80)})
	must(t, err)
	time.Sleep(time.Second)
	start := time.Now()
	f.inject(t, i)
	takeover := w.moved(t, i, start)
	time.Sleep(3 * time.Second)
	from := start.Add(-500 * time.Millisecond)
	attempts := c.Attempts()
	o := availability.Measure(attempts, start, from, time.Now().Add(-time.Second))
	tr := trial{outage: o, takeover: takeover}
	if o.Failed > 0 {
		tr.affected = affected(attempts, from, start, start.Add(o.Recovered))
	}
	for _, conn := range c.Conns() {
		tr.held++
		if conn.Err != nil {
			tr.broken++
		}
	}
	c.Stop()
	f.restore(t, i)
	return tr
}

// affected counts the new connections a fault at fault could fail until
// recovered: those started from the fault on, and those started from from
// on that failed (in flight when it struck).
func affected(attempts []availability.Attempt, from, fault, recovered time.Time) int {
	n := 0
	for _, a := range attempts {
		if a.Start.Before(recovered) && (!a.Start.Before(fault) || (!a.Start.Before(from) && a.Err != nil)) {
			n++
		}
	}
	return n
}

// settled waits until one host (home, unless empty) holds vip and has for
// 2 s, and returns it.
func (b *bench) settled(t *testing.T, vip netip.Addr, home string) string {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		ch := b.holders.Changes(vip, time.Now().Add(-2*time.Second))
		if len(ch) == 1 && len(ch[0].Hosts) == 1 && (home == "" || ch[0].Hosts[0] == home) {
			return ch[0].Hosts[0]
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s not held by %q alone for 2 s: %v", vip, home, b.holders.Now(vip))
	return ""
}

// takeover waits until a host other than owner holds vip.
func (b *bench) takeover(t *testing.T, vip netip.Addr, owner string, since time.Time) time.Duration {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, c := range b.holders.Changes(vip, since) {
			if slices.ContainsFunc(c.Hosts, func(h string) bool { return h != owner }) {
				return c.At.Sub(since)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no host took %s over from %s within 30 s", vip, owner)
	return 0
}

// killGroup crashes a process and everything in its process group.
func killGroup(t *testing.T, p *netlab.Process) {
	t.Helper()
	must(t, syscall.Kill(-p.Pid(), syscall.SIGKILL))
	<-p.Done()
}

// keepalived runs keepalived's VRRP on every LB host, holding one
// address with the given timers (keepalivedTimers; preemption on): lb-1
// has priority 150 and is the master, the others 100.
type keepalived struct {
	b     *bench
	dir   string
	procs []*netlab.Process
}

func (b *bench) startKeepalived(t *testing.T, vip netip.Addr, timers string) *keepalived {
	t.Helper()
	ka := &keepalived{b: b, dir: t.TempDir(), procs: make([]*netlab.Process, len(b.lbs))}
	for i, h := range b.lbs {
		prio := 100
		if i == 0 {
			prio = 150
		}
		conf := fmt.Sprintf(`global_defs {
  router_id %s
}
vrrp_instance groundcloud_bench {
  state BACKUP
  interface %s
  virtual_router_id 51
  priority %d
  %s
  virtual_ipaddress {
    %s/32 dev %s
  }
}
`, h.Name, h.Iface, prio, timers, vip, h.Iface)
		must(t, os.WriteFile(filepath.Join(ka.dir, h.Name+".conf"), []byte(conf), 0o644))
		ka.start(t, i)
	}
	t.Cleanup(ka.stop)
	return ka
}

// stop stops every keepalived (each removes its address); safe to call
// more than once.
func (ka *keepalived) stop() {
	for i, p := range ka.procs {
		if p != nil {
			_ = p.Stop()
			ka.procs[i] = nil
		}
	}
}

func (ka *keepalived) start(t *testing.T, i int) {
	t.Helper()
	h := ka.b.lbs[i]
	file := func(ext string) string { return filepath.Join(ka.dir, h.Name+ext) }
	p, err := h.Start(context.Background(), file(".log"), "keepalived",
		"--dont-fork", "--log-console", "--log-detail", "--vrrp",
		"--use-file", file(".conf"), "--pid", file(".pid"), "--vrrp_pid", file(".vrrp.pid"))
	if err != nil {
		t.Fatalf("keepalived cannot run in a network namespace here: %v", err)
	}
	ka.procs[i] = p
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) + "ms" }

// benchTrials is GROUNDCLOUD_BENCH_TRIALS, or def when it is not set to a
// positive number.
func benchTrials(def int) int {
	if n, err := strconv.Atoi(os.Getenv("GROUNDCLOUD_BENCH_TRIALS")); err == nil && n > 0 {
		return n
	}
	return def
}

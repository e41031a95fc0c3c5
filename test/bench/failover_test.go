package bench

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundcloud/groundcloud/internal/availability"
	"github.com/groundcloud/groundcloud/internal/lab"
	"github.com/groundcloud/groundcloud/internal/sandbox"
	"github.com/groundcloud/groundcloud/internal/testbed"
)

const (
	benchNodePort = 30080
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
}

type scenario struct {
	impl, fault string
	trials      []trial
}

// TestFailoverBenchmark measures, for groundcloud and for keepalived with
// its default timers on the same hosts and data plane, how long new
// connections fail when the host holding a virtual IP fails, and whether
// long-lived connections survive. See docs/benchmarks.md.
func TestFailoverBenchmark(t *testing.T) {
	skipUnlessBench(t)
	trials := 10
	if n, err := strconv.Atoi(os.Getenv("GROUNDCLOUD_BENCH_TRIALS")); err == nil && n > 0 {
		trials = n
	}
	var results []scenario
	t.Run("groundcloud", func(t *testing.T) {
		b := startBench(t, groundcloudArgs(t))
		vip := b.createService(t)
		d := daemon{
			kill:    func(t *testing.T, i int) { killGroup(t, b.Agent(i)) },
			restart: func(t *testing.T, i int) { must(t, b.StartAgent(t.Context(), i)) },
		}
		for _, f := range b.faults(d) {
			results = append(results, b.run(t, "groundcloud", f, vip, trials))
		}
	})
	t.Run("keepalived", func(t *testing.T) {
		b := startBench(t, func(*sandbox.Env, int) []string { return []string{"--vip-ownership=none"} })
		vip := b.createService(t)
		ka := b.startKeepalived(t, vip)
		d := daemon{
			kill:    func(t *testing.T, i int) { killGroup(t, ka.procs[i]) },
			restart: func(t *testing.T, i int) { ka.start(t, i) },
		}
		for _, f := range b.faults(d) {
			results = append(results, b.run(t, "keepalived", f, vip, trials))
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

func groundcloudArgs(t *testing.T) func(*sandbox.Env, int) []string {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	keyFile := filepath.Join(t.TempDir(), "gossip.key")
	must(t, os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString(key)), 0o600))
	return func(e *sandbox.Env, _ int) []string {
		var seeds []string
		for _, h := range e.LBs {
			seeds = append(seeds, h.Addr4.String())
		}
		return []string{
			"--vip-ownership=memberlist", "--gossip-key-file=" + keyFile,
			"--gossip-seeds=" + strings.Join(seeds, ","), "--ownership-hold-down=" + benchHoldDown.String(),
		}
	}
}

type bench struct {
	*sandbox.Env
	holders *availability.Holders
}

func startBench(t *testing.T, agentArgs func(*sandbox.Env, int) []string) *bench {
	t.Helper()
	tools, err := testbed.ToolsDir(t.Context())
	must(t, err)
	e, err := sandbox.Start(t.Context(), sandbox.Options{
		Dir:           t.TempDir(),
		ToolsDir:      tools,
		Binaries:      sandbox.Binaries{ControllerManager: ccmBinary, Agent: agentBinary, NodeSim: nodesimBinary},
		LBHosts:       lbHosts,
		Clients:       []string{"client"},
		NodeSim:       sandbox.NodeSim{TCPPorts: []uint16{benchNodePort}},
		AdminIdentity: true, // a benchmark of failover, not of permissions
		AgentArgs:     agentArgs,
		Logf:          t.Logf,
	})
	must(t, err)
	holders, err := availability.WatchHolders(e.LBs, 10*time.Millisecond)
	if err != nil {
		_ = e.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		holders.Stop()
		if t.Failed() {
			for i, h := range e.LBs {
				t.Logf("last lines of the agent on %s:\n%s", h.Name, testbed.LogTail(e.Agent(i).LogPath, 40))
			}
		}
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	return &bench{Env: e, holders: holders}
}

func (b *bench) createService(t *testing.T) netip.Addr {
	t.Helper()
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: "default"},
		Spec: v1.ServiceSpec{
			Type:     v1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": "bench"},
			Ports:    []v1.ServicePort{{Name: "tcp", Protocol: v1.ProtocolTCP, Port: 80, NodePort: benchNodePort}},
		},
	}
	return createLoadBalancer(t, b.Env, svc)
}

// faults are the failures of one trial: the owner's link goes down (a
// dead host, a pulled cable), or the daemon holding the address is killed
// with SIGKILL (the address and the nftables rules stay in its kernel).
func (b *bench) faults(d daemon) []fault {
	return []fault{
		{
			name:    "link-down",
			inject:  func(t *testing.T, i int) { must(t, b.LBs[i].SetLink(false)) },
			restore: func(t *testing.T, i int) { must(t, b.LBs[i].SetLink(true)) },
		},
		{name: "kill-9", inject: d.kill, restore: d.restart},
	}
}

func (b *bench) run(t *testing.T, impl string, f fault, vip netip.Addr, trials int) scenario {
	s := scenario{impl: impl, fault: f.name}
	time.Sleep(benchHoldDown + 2*time.Second) // every host serving, or a keepalived master elected
	home := b.settled(t, vip, "")
	for n := range trials {
		tr := b.trial(t, f, vip, home)
		t.Logf("%s %s trial %d: gap %s, recovered %s, takeover %s, %d/%d attempts failed, %d of %d long-lived broken",
			impl, f.name, n+1, ms(tr.outage.Gap), ms(tr.outage.Recovered), ms(tr.takeover), tr.outage.Failed, tr.outage.Attempts, tr.broken, tr.held)
		s.trials = append(s.trials, tr)
	}
	return s
}

// trial fails the home host of vip once, measures and restores it.
func (b *bench) trial(t *testing.T, f fault, vip netip.Addr, home string) trial {
	t.Helper()
	owner := b.settled(t, vip, home)
	i := slices.IndexFunc(b.LBs, func(h *lab.Host) bool { return h.Name == owner })
	c, err := availability.Start(t.Context(), availability.Options{From: b.Clients["client"], To: netip.AddrPortFrom(vip, 80)})
	must(t, err)
	time.Sleep(time.Second)
	start := time.Now()
	f.inject(t, i)
	takeover := b.takeover(t, vip, owner, start)
	time.Sleep(3 * time.Second)
	o := availability.Measure(c.Attempts(), start, start.Add(-500*time.Millisecond), time.Now().Add(-time.Second))
	tr := trial{outage: o, takeover: takeover}
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
func killGroup(t *testing.T, p *lab.Process) {
	t.Helper()
	must(t, syscall.Kill(-p.Pid(), syscall.SIGKILL))
	<-p.Done()
}

// keepalived runs keepalived's VRRP on every LB host, holding one
// address with the default timers (advert_int 1, preemption on): lb-1 has
// priority 150 and is the master, the others 100.
type keepalived struct {
	b     *bench
	dir   string
	procs []*lab.Process
}

func (b *bench) startKeepalived(t *testing.T, vip netip.Addr) *keepalived {
	t.Helper()
	ka := &keepalived{b: b, dir: t.TempDir(), procs: make([]*lab.Process, len(b.LBs))}
	for i, h := range b.LBs {
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
  advert_int 1
  virtual_ipaddress {
    %s/32 dev %s
  }
}
`, h.Name, h.Iface, prio, vip, h.Iface)
		must(t, os.WriteFile(filepath.Join(ka.dir, h.Name+".conf"), []byte(conf), 0o644))
		ka.start(t, i)
	}
	t.Cleanup(func() {
		for _, p := range ka.procs {
			if p != nil {
				_ = p.Stop()
			}
		}
	})
	return ka
}

func (ka *keepalived) start(t *testing.T, i int) {
	t.Helper()
	h := ka.b.LBs[i]
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

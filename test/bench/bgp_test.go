package bench

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/groundcloud/groundcloud/internal/annotation"
	"github.com/groundcloud/groundcloud/test/framework/frr"
	"github.com/groundcloud/groundcloud/test/framework/netlab"
	"github.com/groundcloud/groundcloud/test/framework/realcluster"
)

// The BGP benchmark's pool: outside the lab's subnet, so that the client
// reaches it only through the router; announced by the hosts labelled
// bgpHostLabel=true.
const (
	bgpRange     = "198.51.100.0/28"
	bgpRoute     = "198.51.100.0/24"
	bgpHostLabel = "node-restriction.kubernetes.io/bgp"
	// bgpHTTPPort is the BGP Service's HTTP port (the load); port 80 is
	// the line echo (the failover trials).
	bgpHTTPPort = 8080
	// bgpTrials is the default number of trials per scenario, fewer than
	// the failover benchmark's to keep the run short.
	bgpTrials = 5
	// bgpRounds is the default number of load rounds: more than the data
	// plane's, since each compares two measurements on a noisy machine.
	bgpRounds = 5
)

// Scenario names of the BGP benchmark: how the address is announced.
const (
	announceL2  = "l2"
	announceBGP = "bgp"
	// announceBFD is the BGP address again, once the hosts and the
	// router run BFD on the IPv4 sessions (realcluster.BGPPeersBFD,
	// EnableBFD: 100 ms, times 3).
	announceBFD = "bgp+bfd"
)

// TestBGPBenchmark measures, on the real cluster with 2 dedicated
// load-balancer hosts that peer over BGP with FRR and a client behind that
// router, (a) how new and long-lived connections fare when one host fails
// (its agent stopped with SIGTERM, killed with SIGKILL, or its cable
// pulled), over BGP with ECMP next to the same faults for an address
// announced on the link (L2) on the same cluster, and (b) requests/s
// through a BGP address announced by both hosts (ECMP) and by one, side by
// side. See docs/benchmarks.md, section "BGP".
func TestBGPBenchmark(t *testing.T) {
	skipUnlessBench(t)
	start := time.Now()
	requireDataPlaneTools(t)
	must(t, frr.Available())
	trials := benchTrials(bgpTrials)
	b, nh, r := startBGPBench(t)
	vips := b.deployBGP(t)
	b.setAgentArgs(t, "--ownership-hold-down="+benchHoldDown.String())
	nh.waitOnly(t, vips[announceBGP], 0, b.lbs...)
	waitAnswers(t, b.client, vips[announceBGP])
	waitAnswers(t, b.client, vips[announceL2])

	var results []scenario
	t.Run("failover", func(t *testing.T) {
		d := daemon{kill: b.killAgent, restart: b.agentBack}
		faults := append([]fault{b.sigterm()}, b.faults(d)...)
		watches := map[string]func() watch{
			announceL2:  func() watch { return b.l2Watch(vips[announceL2]) },
			announceBGP: func() watch { return &bgpWatch{nh: nh, vip: vips[announceBGP], lbs: b.lbs} },
		}
		for _, announce := range []string{announceL2, announceBGP} {
			for _, f := range faults {
				results = append(results, b.run(t, announce, f, vips[announce], watches[announce](), trials))
			}
		}
	})
	var runs []ecmpRun
	cfg := dataPlaneConfig()
	if os.Getenv("GROUNDCLOUD_BENCH_ROUNDS") == "" {
		cfg.rounds = bgpRounds
	}
	t.Run("throughput", func(t *testing.T) {
		runs = b.ecmpThroughput(t, nh, vips[announceBGP], cfg)
	})
	// Last, as it changes the cluster: the same faults on the BGP address
	// with BFD between the hosts and the router.
	t.Run("failover with BFD", func(t *testing.T) {
		b.enableBFD(t, r)
		nh.waitOnly(t, vips[announceBGP], 0, b.lbs...)
		waitAnswers(t, b.client, vips[announceBGP])
		d := daemon{kill: b.killAgent, restart: b.agentBack}
		for _, f := range append([]fault{b.sigterm()}, b.faults(d)...) {
			w := &bgpWatch{nh: nh, vip: vips[announceBGP], lbs: b.lbs}
			results = append(results, b.run(t, announceBFD, f, vips[announceBGP], w, trials))
		}
	})
	res := bgpResults{trials: trials, failover: results, cfg: cfg, runs: runs, elapsed: time.Since(start)}
	for _, l := range res.lines() {
		fmt.Println(l)
	}
	if path := os.Getenv("GROUNDCLOUD_BENCH_DOCS"); path != "" && !t.Failed() {
		must(t, writeSection(path, "## BGP", bgpSection(t, res)))
		t.Logf("wrote the BGP section of %s", path)
	}
}

// startBGPBench starts the cluster of the BGP benchmark: 2 dedicated
// load-balancer hosts labelled to announce pool "bgp", 2 workers, FRR in
// host "frr" (realcluster.StartFRR: 3 s hold time, ECMP with an L4 hash)
// and a client that reaches the pool through it.
func startBGPBench(t *testing.T) (*bench, *nexthops, *frr.Instance) {
	t.Helper()
	return startBGPBenchWith(t, func(c *realcluster.Cluster) string { return bgpBenchConfig(c, false) })
}

// startBGPBenchWith is startBGPBench with the cloud-config config says.
func startBGPBenchWith(t *testing.T, config func(*realcluster.Cluster) string) (*bench, *nexthops, *frr.Instance) {
	t.Helper()
	return startBGPBenchFrom(t, "", config)
}

// startBGPBenchFrom is startBGPBenchWith with groundcloud installed from
// the checkout at repo ("" this one).
func startBGPBenchFrom(t *testing.T, repo string, config func(*realcluster.Cluster) string) (*bench, *nexthops, *frr.Instance) {
	t.Helper()
	b := startClusterBench(t, realcluster.Options{
		Topology:       netlab.Topology{LBHosts: lbHosts, Clients: []string{"client", "frr"}},
		Workers:        2,
		Repo:           repo,
		CloudConfigFor: config,
	})
	r, err := b.c.StartFRR(t.Context(), b.c.Clients["frr"])
	must(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("FRR's bgpd log: %s", r.Log("bgpd"))
		}
		_ = r.Stop()
	})
	must(t, realcluster.RouteThrough(t.Context(), b.client, r.Host, netip.MustParsePrefix(bgpRoute)))
	for _, h := range b.lbs {
		b.setHostLabel(t, h.Name, true)
	}
	nh, err := watchNexthops(r.Host, b.lbs, netip.MustParsePrefix(bgpRoute), 10*time.Millisecond)
	must(t, err)
	t.Cleanup(nh.stop)
	return b, nh, r
}

// bgpBenchConfig is the BGP benchmark's cloud-config: pool "bgp" and the
// router's peers, with BFD on the IPv4 one when bfd.
func bgpBenchConfig(c *realcluster.Cluster, bfd bool) string {
	peers := realcluster.BGPPeers(c.Clients["frr"])
	if bfd {
		peers = realcluster.BGPPeersBFD(c.Clients["frr"])
	}
	return fmt.Sprintf("[Pool \"bgp\"]\naddresses = %s\nannounce = bgp\nauto-assign = false\nhosts = %s=true\n\n", bgpRange, bgpHostLabel) + peers
}

// enableBFD turns BFD on for the IPv4 sessions: on the router, then in
// the cloud-config, restarting the agents; it returns once the router's
// BFD session with every load-balancer host is up.
func (b *bench) enableBFD(t *testing.T, r *frr.Instance) {
	t.Helper()
	must(t, realcluster.EnableBFD(t.Context(), r))
	conf := strings.Replace(b.c.CloudConfig, bgpBenchConfig(b.c, false), bgpBenchConfig(b.c, true), 1)
	if conf == b.c.CloudConfig {
		t.Fatal("the cloud-config does not hold the benchmark's BGP part")
	}
	must(t, b.c.SetCloudConfig(t.Context(), conf))
	deadline := time.Now().Add(2 * time.Minute)
	for {
		peers, err := r.BFDPeers(t.Context())
		up := err == nil
		for _, h := range b.lbs {
			up = up && peers[h.Addr4].Status == "up"
		}
		if up {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the router's BFD sessions with the hosts are not up within 2 minutes: %+v (%v)", peers, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// deployBGP runs groundcloud-echo on both workers and, in front of them,
// a Service of pool "bgp" (line echo on port 80, HTTP on bgpHTTPPort) and
// one of the default pool, announced on the link (line echo on port 80);
// both passthrough forwarding, externalTrafficPolicy Cluster.
func (b *bench) deployBGP(t *testing.T) map[string]netip.Addr {
	t.Helper()
	b.deployEcho(t, "bgpbench")
	lines := v1.ServicePort{Name: "lines", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(realcluster.EchoLinesPort)}
	http := v1.ServicePort{Name: "http", Protocol: v1.ProtocolTCP, Port: bgpHTTPPort, TargetPort: intstr.FromInt32(realcluster.EchoHTTPPort)}
	bgp := echoService("bgp", "bgpbench", lines, http)
	bgp.Annotations[annotation.Pool] = "bgp"
	vips := map[string]netip.Addr{
		announceBGP: b.loadBalancer(t, bgp),
		announceL2:  b.loadBalancer(t, echoService("l2", "bgpbench", lines)),
	}
	must(t, b.c.WaitDeploymentReady(t.Context(), "default", "bgpbench"))
	return vips
}

// setHostLabel sets (or removes) bgpHostLabel=true on Node node.
func (b *bench) setHostLabel(t *testing.T, node string, on bool) {
	t.Helper()
	setLabel(t, b.c, node, bgpHostLabel, on)
}

// setLabel sets (or removes) label=true on Node node.
func setLabel(t *testing.T, c *realcluster.Cluster, node, label string, on bool) {
	t.Helper()
	value := `"true"`
	if !on {
		value = "null"
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, label, value)
	_, err := c.Client.CoreV1().Nodes().Patch(t.Context(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	must(t, err)
}

// sigterm is the graceful fault: the agent's Pod on the host is deleted
// (its container gets SIGTERM and the grace period), as a rollout or a
// drain does; the DaemonSet controller creates a new one.
func (b *bench) sigterm() fault {
	var old types.UID
	return fault{
		name: "sigterm",
		inject: func(t *testing.T, i int) {
			pod, _, err := b.c.AgentContainer(t.Context(), b.lbs[i].Name)
			must(t, err)
			old = pod.UID
			must(t, b.c.Client.CoreV1().Pods(pod.Namespace).Delete(t.Context(), pod.Name, metav1.DeleteOptions{}))
		},
		restore: func(t *testing.T, i int) { b.agentReplaced(t, i, old) },
	}
}

// agentReplaced waits until an agent Pod other than old runs ready on
// host i.
func (b *bench) agentReplaced(t *testing.T, i int, old types.UID) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		pod, _, err := b.c.AgentContainer(t.Context(), b.lbs[i].Name)
		if err == nil && pod.UID != old && pod.DeletionTimestamp == nil && pod.Status.ContainerStatuses[0].Ready {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new agent ready on %s within 3 minutes (%v)", b.lbs[i].Name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitAnswers waits until 20 new connections in a row to vip's line echo
// are greeted by a Pod.
func waitAnswers(t *testing.T, client *netlab.Host, vip netip.Addr) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	var last error
	for ok := 0; ok < 20; {
		if time.Now().After(deadline) {
			t.Fatalf("%s does not answer 20 new connections in a row within 2 minutes; last error: %v", vip, last)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		conn, err := client.DialTCP(ctx, netip.AddrPortFrom(vip, 80))
		cancel()
		if err == nil {
			_ = conn.SetReadDeadline(time.Now().Add(time.Second))
			_, err = conn.Read(make([]byte, 64))
			conn.Close()
		}
		if err != nil {
			ok, last = 0, err
			time.Sleep(100 * time.Millisecond)
			continue
		}
		ok++
	}
}

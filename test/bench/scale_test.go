package bench

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudapi "k8s.io/cloud-provider/api"

	"github.com/groundcloud/groundcloud/test/framework/availability"
	"github.com/groundcloud/groundcloud/test/framework/realcluster"
)

// scaleResult is everything TestScaleBenchmark measured.
type scaleResult struct {
	// Scale: 1,000 Services created at once.
	created       time.Duration   // creating them (the client's side)
	allAddressed  time.Duration   // from the first create until the last got an address
	toAddress     []time.Duration // per service, create call to address
	toTraffic     []time.Duration // sample: address to first connection
	moreToTraffic []time.Duration // the same, of the more Services while they are created
	// The same samples split where the agent added the VIP to its
	// interface (its log): address to that, and that to first connection.
	toVIP, fromVIP         []time.Duration
	moreToVIP, moreFromVIP []time.Duration
	// The same samples: how long after the address their endpoints came
	// (kube-controller-manager's EndpointSlice), and from the later of the
	// two to the first connection.
	endpointsLate, readyToTraffic         []time.Duration
	moreEndpointsLate, moreReadyToTraffic []time.Duration
	scaleWrites                           writes
	scaleQuiet                            bool
	footprint1000                         [2]footprint // controller manager, agent

	// Restart of the controller manager.
	ccmWrites writes
	ccmQuiet  bool
	ccmSteady time.Duration // until every Service had an EnsuredLoadBalancer event

	// Restart of the agent, SIGKILL and SIGTERM.
	agentKill, agentTerm agentRestart

	// Node churn, at 1,000 and after the more below.
	churn     [2]churnResult // add, remove
	churnMore [2]churnResult

	// Up to 4,000 more (bounded: see more).
	moreCreated    int           // created within moreCreateBudget
	moreCreateTime time.Duration // creating them
	moreAddressedN int           // of those, addressed within moreWaitBudget
	moreAddressed  time.Duration
	moreCPU        [2]time.Duration
	// moreKubeProxyCPU: the CPU of the kube-proxies of the 4 nodes with a
	// kubelet (3 workers and the load-balancer host) for them, summed.
	moreKubeProxyCPU time.Duration
	footprint5000    [2]footprint
	moreRuleset      time.Duration // until the agent's map held all 5,000
	// moreSyncs are the agent's data-plane syncs while it created them.
	moreSyncs syncStats
}

type agentRestart struct {
	signal   string
	synced   time.Duration // start of the new agent to its first full sync (log)
	ruleset  time.Duration // stop to the map holding every service again
	sample   time.Duration // stop to every sample VIP answering
	outage   availability.Outage
	downtime time.Duration // SIGTERM: from the signal until the old agent had exited
}

type churnResult struct {
	ruleset time.Duration // until every bucket map in the agent's table reflected it
	// initialised: added, until the upstream cloud-node controller had
	// initialised the Node (provider ID set, its taint gone), before which
	// no agent takes it as a backend; 0 when removed or not seen.
	initialised time.Duration
	// healthy: added, until its kube-proxy's /healthz answered 200 (the
	// agent's health check of nodes for externalTrafficPolicy Cluster).
	healthy  time.Duration
	missed   int // chains that did not within churnWait (then ruleset is churnWait)
	writes   writes
	agentCPU time.Duration // the agent's CPU from the change until the writes were still
}

// TestScaleBenchmark measures the control plane at 1,000 and 5,000
// LoadBalancer Services on 100 Nodes: time to addresses and to traffic,
// apiserver writes, restarts of the controller manager and the agent, a
// node joining and leaving, and memory and CPU. See docs/benchmarks.md.
func TestScaleBenchmark(t *testing.T) {
	skipUnlessBench(t)
	began := time.Now()
	s := startScaleEnv(t)
	t.Logf("environment ready in %s", time.Since(began).Round(time.Second))
	var r scaleResult
	s.scale(t, &r)
	r.footprint1000 = s.footprints(t, "1000")
	s.restartCCM(t, &r)
	r.agentKill = s.restartAgent(t, "SIGKILL")
	r.agentTerm = s.restartAgent(t, "SIGTERM")
	r.churn = s.churnHost(churnNodes[0]).churn(t, s, scaleServices)
	s.more(t, &r)
	r.churnMore = s.churnHost(churnNodes[1]).churn(t, s, scaleServices+r.moreAddressedN)
	t.Logf("scale benchmark took %s", time.Since(began).Round(time.Second))
	fmt.Println(r.line())
	if path := os.Getenv("GROUNDCLOUD_BENCH_DOCS"); path != "" && !t.Failed() {
		must(t, writeSection(path, "## Scale", scaleSection(t, &r)))
		t.Logf("wrote the Scale section of %s", path)
	}
}

// footprints reads both processes' memory and CPU, and saves their heap
// profiles under label (none when label is empty; see heapProfiles).
func (s *scaleEnv) footprints(t *testing.T, label string) [2]footprint {
	t.Helper()
	ccmPid, err := s.ccmPid(t.Context())
	must(t, err)
	ccm, err := readFootprint(ccmPid)
	must(t, err)
	agent := s.agentFootprint(t)
	t.Logf("footprint: controller manager RSS %s (peak %s) CPU %s; agent RSS %s (peak %s) CPU %s",
		mib(ccm.RSS), mib(ccm.HWM), ccm.CPU, mib(agent.RSS), mib(agent.HWM), agent.CPU)
	if label != "" {
		s.heapProfiles(t, label)
	}
	return [2]footprint{ccm, agent}
}

func (s *scaleEnv) agentFootprint(t *testing.T) footprint {
	t.Helper()
	pid, err := s.agentPid(t.Context())
	must(t, err)
	f, err := readFootprint(pid)
	must(t, err)
	return f
}

// kubeProxyCPU is the CPU the kube-proxies of the nodes with a kubelet
// have used since they started, summed.
func (s *scaleEnv) kubeProxyCPU(t *testing.T) time.Duration {
	t.Helper()
	var sum time.Duration
	for _, n := range s.c.Nodes {
		_, id, err := s.c.PodContainer(t.Context(), metav1.NamespaceSystem, "k8s-app=kube-proxy", n.Name)
		must(t, err)
		pid, err := n.ContainerPID(t.Context(), id)
		must(t, err)
		f, err := readFootprint(pid)
		must(t, err)
		sum += f.CPU
	}
	return sum
}

// scale creates 1,000 Services at once and measures time to address, to
// traffic for a sample, and apiserver writes.
func (s *scaleEnv) scale(t *testing.T, r *scaleResult) {
	ctx := t.Context()
	w, err := watchAddresses(ctx, s.fast)
	must(t, err)
	defer w.stop()
	before, err := readWrites(ctx, s.fast)
	must(t, err)

	sctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	sample := s.trafficSample(sctx, w, 0, scaleServices)

	start := time.Now()
	must(t, s.createServices(ctx, 0, scaleServices))
	r.created = time.Since(start)
	t.Logf("created %d services in %s", scaleServices, r.created.Round(time.Millisecond))
	if !pollUntil(ctx, 50*time.Millisecond, 5*time.Minute, func() bool { n, _ := w.count(0, scaleServices); return n == scaleServices }) {
		n, _ := w.count(0, scaleServices)
		t.Fatalf("only %d of %d services got an address within 5 minutes", n, scaleServices)
	}
	_, last := w.count(0, scaleServices)
	r.allAddressed = last.Sub(start)
	w.mu.Lock()
	for i := range scaleServices {
		name := scaleServiceName(i)
		if c, ok := s.createdAt.Load(name); ok {
			r.toAddress = append(r.toAddress, w.at[name].Sub(c.(time.Time)))
		}
	}
	w.mu.Unlock()
	t.Logf("all %d services had an address %s after the first create", scaleServices, r.allAddressed.Round(time.Millisecond))
	samples, sampleErrs := sample()
	r.toTraffic = trafficTimes(samples)
	r.readyToTraffic, r.endpointsLate = sinceReady(samples), endpointsLate(samples)
	r.toVIP, r.fromVIP = s.splitAtVIP(t, samples)
	if len(sampleErrs) > 0 {
		t.Fatalf("%d of %d sampled services carried no traffic within 5 minutes; first: %v", len(sampleErrs), scaleSample, sampleErrs[0])
	}
	t.Logf("address to traffic (sample of %d): p50 %s p99 %s max %s", len(r.toTraffic),
		percentile(r.toTraffic, 50), percentile(r.toTraffic, 99), percentile(r.toTraffic, 100))
	after, quiet, err := quiesce(ctx, s.fast, 3*time.Second, 3*time.Minute)
	must(t, err)
	r.scaleWrites, r.scaleQuiet = after.minus(before), quiet
	t.Logf("writes while creating %d services (quiet afterwards: %v): %s", scaleServices, quiet, r.scaleWrites)
}

// restartCCM crashes the leading controller manager (SIGKILL to its
// container) with the Services in place: the other replica takes the
// Lease once it expires, or the kubelet's restart of the crashed one does.
// It is steady when the logs say the provider has ensured every Service
// ("Ensured LoadBalancer", logged at -v=2 when EnsureLoadBalancer
// returns). Not the EnsuredLoadBalancer Events: the upstream event
// broadcaster drops Events beyond a queue of 1,000, both before writing
// them and before logging them.
func (s *scaleEnv) restartCCM(t *testing.T, r *scaleResult) {
	ctx := t.Context()
	before, _, err := quiesce(ctx, s.fast, 3*time.Second, 2*time.Minute)
	must(t, err)
	pod, id, err := s.ccmLeader(ctx)
	must(t, err)
	ensured := newLogsCount(s.ccmLogs, `"Ensured LoadBalancer"`)
	start := time.Now()
	must(t, s.c.Node(pod.Spec.NodeName).KillContainer(ctx, id))
	if !pollUntil(ctx, 100*time.Millisecond, 3*time.Minute, func() bool { return ensured.poll() >= scaleServices }) {
		t.Fatalf("after the leader's crash the controller managers logged only %d of %d services ensured within 3 minutes", ensured.n, scaleServices)
	}
	r.ccmSteady = ensured.at.Sub(start)
	after, quiet, err := quiesce(ctx, s.fast, 3*time.Second, 2*time.Minute)
	must(t, err)
	r.ccmWrites, r.ccmQuiet = after.minus(before), quiet
	leader, _, err := s.ccmLeader(ctx)
	must(t, err)
	t.Logf("controller manager restart: %s crashed, %s leads; every service ensured after %s; writes %s",
		pod.Name, leader.Name, r.ccmSteady.Round(time.Millisecond), r.ccmWrites)
}

// restartAgent stops the agent and the kubelet starts it again, while a
// client opens a connection to a sample VIP every 20 ms. SIGKILL: its
// container crashes (the rules and addresses stay in the kernel) and the
// kubelet restarts it; SIGTERM: its Pod is deleted, as a rolling update
// does (the agent removes its rules and addresses on the way out), and
// the DaemonSet controller makes a new one.
func (s *scaleEnv) restartAgent(t *testing.T, signal string) agentRestart {
	ctx := t.Context()
	res := agentRestart{signal: signal}
	vips := s.sampleVIPs(t)
	c, err := availability.Start(ctx, availability.Options{From: s.cli, To: vips[0], Held: -1})
	must(t, err)
	defer c.Stop()
	time.Sleep(time.Second)

	pod, id, err := s.c.AgentContainer(ctx, s.lb.Name)
	must(t, err)
	pid, err := s.lb.ContainerPID(ctx, id)
	must(t, err)
	synced := newLogsCount(s.agentLogs, "Synced data plane")
	stop := time.Now()
	if signal == "SIGKILL" {
		must(t, s.lb.KillContainer(ctx, id))
	} else {
		must(t, s.fast.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}))
		// Until the old agent has exited.
		pollUntil(ctx, 10*time.Millisecond, time.Minute, func() bool { return syscall.Kill(pid, 0) != nil })
		res.downtime = time.Since(stop)
	}
	sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		// The new agent's first sync, from the start of its container.
		if pollUntil(sctx, 20*time.Millisecond, 3*time.Minute, func() bool { return synced.poll() > 0 }) {
			if started, err := s.agentStarted(sctx); err == nil {
				res.synced = synced.at.Sub(started)
			} else {
				t.Logf("%s: %v", signal, err)
			}
		}
	})
	if !pollUntil(ctx, 20*time.Millisecond, 3*time.Minute, func() bool { return s.servicePorts(ctx) >= scaleServices }) {
		t.Fatalf("%s: the agent's map did not hold %d services within 3 minutes", signal, scaleServices)
	}
	res.ruleset = time.Since(stop)
	var last time.Time
	var mu sync.Mutex
	var errs []error
	for _, vip := range vips {
		wg.Go(func() {
			done, err := s.dialUntil(sctx, vip)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			} else if done.After(last) {
				last = done
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%s: %d sample VIPs did not answer after the agent restarted: %v", signal, len(errs), errs[0])
	}
	if res.synced == 0 {
		t.Fatalf("%s: the new agent logged no data plane sync", signal)
	}
	res.sample = last.Sub(stop)
	time.Sleep(time.Second)
	res.outage = availability.Measure(c.Attempts(), stop, stop.Add(-500*time.Millisecond), time.Now())
	t.Logf("agent %s: first sync %s after start, map full %s and every sample VIP answering %s after the signal; %d of %d connections failed (gap %s)",
		signal, res.synced.Round(time.Millisecond), res.ruleset.Round(time.Millisecond), res.sample.Round(time.Millisecond),
		res.outage.Failed, res.outage.Attempts, res.outage.Gap.Round(time.Millisecond))
	return res
}

// sampleVIPs are the addresses and ports of the sampled Services.
func (s *scaleEnv) sampleVIPs(t *testing.T) []netip.AddrPort {
	var out []netip.AddrPort
	for i := range scaleServices {
		if _, ok := isSample(i); !ok {
			continue
		}
		svc, err := s.fast.CoreV1().Services(scaleNamespace).Get(t.Context(), scaleServiceName(i), metav1.GetOptions{})
		must(t, err)
		if len(svc.Status.LoadBalancer.Ingress) == 0 {
			t.Fatalf("service %s lost its address", svc.Name)
		}
		out = append(out, netip.AddrPortFrom(netip.MustParseAddr(svc.Status.LoadBalancer.Ingress[0].IP), 80))
	}
	return out
}

// churnWait bounds the wait for the agent's ruleset after a node change.
const churnWait = 3 * time.Minute

// churnHost is a late worker of the cluster for the node churn: its
// machine is in the lab and in the inventory from the start; it joins
// (containerd and kubelet start, the kubelet registers its Node) and later
// leaves (it shuts down and its Node is deleted).
type churnHost struct {
	name string
	node *realcluster.Node
}

func (s *scaleEnv) churnHost(name string) *churnHost {
	return &churnHost{name: name, node: s.c.Node(name)}
}

// churn joins the host's node and later takes it out, and measures when
// the agent's ruleset reflects each (services chains DNAT to it: all of
// them, then none), what each wrote to the apiserver (the LoadBalancer
// objects do not list nodes: nothing but the Node and its kubelet's and
// DaemonSets' objects) and the agent's CPU for it. A join is timed from
// the kubelet's registration of the Node (polled every 20 ms), and split
// at when the cloud-node controller initialised it and when its
// kube-proxy first answered the agent's health check (/healthz on its
// address): the agent takes no node before either.
func (c *churnHost) churn(t *testing.T, s *scaleEnv, services int) [2]churnResult {
	ctx := t.Context()
	var out [2]churnResult
	addr := c.node.Host.Addr4
	for i, add := range []bool{true, false} {
		before, _, err := quiesce(ctx, s.fast, 3*time.Second, 2*time.Minute)
		must(t, err)
		// The agent applies a node change to every bucket map (the one its
		// Services with externalTrafficPolicy Cluster share) in one nft
		// transaction, so the time is read on the map of one service and
		// every service port is checked afterwards. With up to 128 nodes
		// every node owns a bucket of every map.
		probe, err := s.bucketMapOf(ctx, scaleServiceName(0))
		must(t, err)
		cpu0 := s.agentFootprint(t)
		var res churnResult
		var start time.Time
		joined := make(chan error, 1)
		if add {
			go func() { joined <- s.c.Join(ctx, c.name) }()
			if !pollUntil(ctx, 20*time.Millisecond, churnWait, func() bool {
				_, err := s.fast.CoreV1().Nodes().Get(ctx, c.name, metav1.GetOptions{})
				return err == nil
			}) {
				t.Fatalf("node %s did not register within %s: %v", c.name, churnWait, <-joined)
			}
			start = time.Now()
		} else {
			start = time.Now()
			must(t, s.c.Leave(ctx, c.name))
			close(joined)
		}
		var initialised, healthy chan time.Duration
		if add {
			initialised, healthy = make(chan time.Duration, 1), make(chan time.Duration, 1)
			go func() { initialised <- c.untilInitialised(ctx, s, start) }()
			go func() { healthy <- c.untilHealthy(ctx, s, start) }()
		}
		want := 0
		if add {
			want = services
		}
		if !pollUntil(ctx, 20*time.Millisecond, churnWait, func() bool {
			has, err := s.mapHas(ctx, probe, addr)
			return err == nil && has == add
		}) {
			t.Logf("node %s (added: %v): bucket map %s not changed after %s", c.name, add, probe, churnWait)
		}
		res.ruleset = time.Since(start)
		if add {
			res.initialised, res.healthy = <-initialised, <-healthy
			must(t, <-joined)
		}
		n, err := s.servicesWith(ctx, addr)
		if err != nil || n != want {
			res.missed = max(want-n, n-want)
			t.Logf("node %s (added: %v): %d service ports DNAT to it once %s had changed, want %d (%v)", c.name, add, n, probe, want, err)
		}
		after, _, err := quiesce(ctx, s.fast, 3*time.Second, 2*time.Minute)
		must(t, err)
		cpu1 := s.agentFootprint(t)
		res.writes, res.agentCPU = after.minus(before), cpu1.CPU-cpu0.CPU
		out[i] = res
		t.Logf("node %s added=%v at %d services: initialised after %s, kube-proxy healthy after %s; every bucket map of the agent after %s; agent CPU %s; writes %s",
			c.name, add, services, res.initialised.Round(time.Millisecond), res.healthy.Round(time.Millisecond),
			res.ruleset.Round(time.Millisecond), res.agentCPU, res.writes)
	}
	return out
}

// untilHealthy polls the node's kube-proxy /healthz from the
// load-balancer host every 20 ms, as the agent's health check does, until
// it answers 200, and returns the time since start (0 when not within
// churnWait).
func (c *churnHost) untilHealthy(ctx context.Context, s *scaleEnv, start time.Time) time.Duration {
	hc := s.lb.Host.HTTPClient()
	hc.Timeout = time.Second
	url := fmt.Sprintf("http://%s/healthz", netip.AddrPortFrom(c.node.Host.Addr4, 10256))
	var at time.Duration
	pollUntil(ctx, 20*time.Millisecond, churnWait, func() bool {
		if _, err := get(ctx, hc, url); err != nil {
			return false
		}
		at = time.Since(start)
		return true
	})
	return at
}

// untilInitialised polls the churn host's Node every 20 ms until the
// cloud-node controller has initialised it, and returns the time since
// start (0 when not within churnWait).
func (c *churnHost) untilInitialised(ctx context.Context, s *scaleEnv, start time.Time) time.Duration {
	var at time.Duration
	pollUntil(ctx, 20*time.Millisecond, churnWait, func() bool {
		n, err := s.fast.CoreV1().Nodes().Get(ctx, c.name, metav1.GetOptions{})
		if err != nil || n.Spec.ProviderID == "" || slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == cloudapi.TaintExternalCloudProvider }) {
			return false
		}
		at = time.Since(start)
		return true
	})
	return at
}

// more creates up to 4,000 more Services and measures time to address
// and the footprint at the new total. It is bounded: creation stops after
// moreCreateBudget and the waits after moreWaitBudget each; what was
// reached is reported as it is.
func (s *scaleEnv) more(t *testing.T, r *scaleResult) {
	ctx := t.Context()
	if _, _, err := quiesce(ctx, s.fast, 3*time.Second, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	pre := s.footprints(t, "")
	proxyPre := s.kubeProxyCPU(t)
	w, err := watchAddresses(ctx, s.fast)
	must(t, err)
	defer w.stop()
	// The sample of the more Services, as in scale, while the others are
	// being created.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sample := s.trafficSample(sctx, w, scaleServices, scaleServices+scaleMore)
	profiled := s.cpuProfiles(t, "more", 60*time.Second, 60*time.Second)
	defer profiled()
	syncsBefore, err := s.agentSyncs(ctx)
	must(t, err)
	start := time.Now()
	n, end, err := s.createServicesUntil(ctx, scaleServices, scaleServices+scaleMore, start.Add(moreCreateBudget))
	must(t, err)
	syncsAfter, err := s.agentSyncs(ctx)
	must(t, err)
	r.moreSyncs = syncsAfter.minus(syncsBefore)
	t.Logf("agent data-plane syncs while creating them: %d, mean %s", r.moreSyncs.count, r.moreSyncs.mean().Round(time.Millisecond))
	r.moreCreated, r.moreCreateTime = n, time.Since(start)
	t.Logf("created %d more services in %s", n, r.moreCreateTime.Round(time.Millisecond))
	defer func() {
		time.AfterFunc(moreWaitBudget, cancel)
		samples, sampleErrs := sample()
		r.moreToTraffic = trafficTimes(samples)
		r.moreReadyToTraffic, r.moreEndpointsLate = sinceReady(samples), endpointsLate(samples)
		r.moreToVIP, r.moreFromVIP = s.splitAtVIP(t, samples)
		// Those never created (the budget) never got an address.
		sampleErrs = slices.DeleteFunc(sampleErrs, func(err error) bool { return errors.Is(err, errNoAddress) })
		if len(sampleErrs) > 0 {
			t.Errorf("%d sampled services of the more carried no traffic within %s; first: %v", len(sampleErrs), moreWaitBudget, sampleErrs[0])
		}
		t.Logf("address to traffic while creating the more (sample of %d): p50 %s p99 %s max %s", len(r.moreToTraffic),
			percentile(r.moreToTraffic, 50), percentile(r.moreToTraffic, 99), percentile(r.moreToTraffic, 100))
	}()
	pollUntil(ctx, 100*time.Millisecond, moreWaitBudget, func() bool {
		k, _ := w.count(scaleServices, end)
		return k == n
	})
	k, last := w.count(scaleServices, end)
	r.moreAddressedN = k
	if k > 0 {
		r.moreAddressed = last.Sub(start)
	}
	total := scaleServices + k
	if pollUntil(ctx, 200*time.Millisecond, moreWaitBudget, func() bool { return s.servicePorts(ctx) >= total }) {
		r.moreRuleset = time.Since(start)
	}
	if _, _, err := quiesce(ctx, s.fast, 3*time.Second, time.Minute); err != nil {
		t.Fatal(err)
	}
	r.footprint5000 = s.footprints(t, fmt.Sprint(scaleServices+n))
	for i := range 2 {
		r.moreCPU[i] = r.footprint5000[i].CPU - pre[i].CPU
	}
	r.moreKubeProxyCPU = s.kubeProxyCPU(t) - proxyPre
	t.Logf("%d more services (of %d planned): %d addressed after %s, the agent's map held them after %s (0: not within %s)",
		n, scaleMore, k, r.moreAddressed.Round(time.Millisecond), r.moreRuleset.Round(time.Millisecond), moreWaitBudget)
}

// errNoAddress: a sampled Service got no address.
var errNoAddress = errors.New("no address")

// sampled is one sampled Service: its address, when the benchmark saw it
// in the Service's status, and when the first connection through it
// succeeded.
type sampled struct {
	ip       netip.Addr
	at, done time.Time
	// endpoints: when its EndpointSlice first had a ready endpoint (zero:
	// not seen before the connection).
	endpoints time.Time
}

// sinceReady returns, for each sample whose endpoints were seen, the time
// from the later of its address and its endpoints to its first
// connection: what is left once kube-controller-manager has written the
// endpoints that kube-proxy needs.
func sinceReady(samples []sampled) []time.Duration {
	var out []time.Duration
	for _, x := range samples {
		if !x.endpoints.IsZero() {
			out = append(out, x.done.Sub(later(x.at, x.endpoints)))
		}
	}
	return out
}

// endpointsLate returns, for each sample whose endpoints were seen, how
// long after its address they were (0 when before).
func endpointsLate(samples []sampled) []time.Duration {
	var out []time.Duration
	for _, x := range samples {
		if !x.endpoints.IsZero() {
			out = append(out, max(0, x.endpoints.Sub(x.at)))
		}
	}
	return out
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// trafficTimes returns each sample's time from address to first connection.
func trafficTimes(samples []sampled) []time.Duration {
	var out []time.Duration
	for _, x := range samples {
		out = append(out, x.done.Sub(x.at))
	}
	return out
}

// trafficSample starts, for each sampled Service in [from, to), a goroutine
// that waits for its address and then dials through it until a connection
// succeeds, until ctx ends. The function it returns waits for them and
// returns the samples that connected, and the errors.
func (s *scaleEnv) trafficSample(ctx context.Context, w *addressWatch, from, to int) func() ([]sampled, []error) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	var samples []sampled
	var errs []error
	for i := from; i < to; i++ {
		if _, ok := isSample(i); !ok {
			continue
		}
		wg.Go(func() {
			at, ip, err := w.wait(ctx, scaleServiceName(i))
			var done time.Time
			var addr netip.Addr
			if err != nil {
				err = fmt.Errorf("%s: %w: %w", scaleServiceName(i), errNoAddress, err)
			} else {
				addr = netip.MustParseAddr(ip)
				done, err = s.dialUntil(ctx, netip.AddrPortFrom(addr, 80))
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			samples = append(samples, sampled{ip: addr, at: at, done: done, endpoints: w.endpointsAt(scaleServiceName(i))})
		})
	}
	return func() ([]sampled, []error) {
		wg.Wait()
		return samples, errs
	}
}

func joinComma(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ","
		}
		out += x
	}
	return out
}

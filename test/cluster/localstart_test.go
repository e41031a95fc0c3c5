package clustertest

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/groundcloud/groundcloud/internal/annotation"
	"github.com/groundcloud/groundcloud/internal/lbapi"
	"github.com/groundcloud/groundcloud/test/framework/realcluster"
)

// checkLocalFromTheStart: a new Local Service whose only Pod runs on
// node-2 is answered without a failure from its first connection on. The
// agents forward to a node only once its kube-proxy's healthCheckNodePort
// has said that it has the Pod (they wait for the first probes of a new
// Service's targets before they program it), and a real kube-proxy drops
// what reaches a node without one: a node programmed too early shows as
// failed connections. A client dials the requested address from before the
// Service exists; from its first answer on, 200 connections in a row must
// each be answered by node-2's Pod. Then both agents are killed at once
// (checkLocalAcrossAgentRestarts). The switch from Cluster to Local is
// checkLocalSwitch. (test/e2e TestLocalTrafficFromTheStart also checks a
// clean agent stop on simulated nodes.)
func checkLocalFromTheStart(t *testing.T, c *realcluster.Cluster) {
	const node, want = "node-2", 200
	// Requested, so that the client can dial it before it exists; near the
	// end of the pool, which nothing before this check reaches.
	vip := c.Opts.Subnet4.Addr().As4()
	vip[3] = 218
	addr := netip.AddrFrom4(vip)
	client := lbClient(c.Clients["client"])
	client.Timeout = time.Second

	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	type result struct {
		answers map[string]int
		failed  []string
	}
	done := make(chan result, 1)
	go func() {
		res := result{answers: map[string]int{}}
		for n := 0; n < want && ctx.Err() == nil; {
			a, err := get(ctx, client, url(addr))
			switch {
			case err == nil:
				res.answers[a.node]++
				n++
			case len(res.answers) > 0:
				res.failed = append(res.failed, err.Error())
				n++
			default: // not served yet
				time.Sleep(20 * time.Millisecond)
			}
		}
		done <- res
	}()
	// The Pod first, ready, then the Service: every node's kube-proxy
	// knows the endpoint by the time the agents first probe, so a node
	// programmed before its probe said so would be one without the Pod.
	const name = "first"
	createEcho(t, c, name, 1, map[string]string{corev1.LabelHostname: node})
	if err := c.WaitDeploymentReady(ctx, echoNS, name); err != nil {
		t.Fatal(err)
	}
	exposeProxy(t, c, name, func(svc *corev1.Service) {
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		svc.Annotations[annotation.LoadBalancerIPs] = addr.String()
	})
	res := <-done
	total := len(res.failed)
	for _, n := range res.answers {
		total += n
	}
	switch {
	case total < want:
		t.Fatalf("%d connections through %s within 4 minutes (answers by node %v, %d failed), want %d", total, addr, res.answers, len(res.failed), want)
	case len(res.failed) > 0:
		t.Errorf("%d of %d connections after the first answer failed (answers by node %v); first: %s", len(res.failed), want, res.answers, res.failed[0])
	case res.answers[node] != want:
		t.Errorf("answers by node %v, want all %d from %s", res.answers, want, node)
	}
	t.Logf("from the first answer on, %d connections through %s: answers by node %v", want, addr, res.answers)
	if t.Failed() {
		return
	}
	checkLocalAcrossAgentRestarts(t, c, addr, node)
}

// checkLocalAcrossAgentRestarts: both agents killed at once (kill -9 of
// their containers: their rules and addresses stay in the kernels) and
// restarted by their kubelets: a restarted agent starts knowing no health,
// and must program the nodes its probes approve, not every node; a real
// kube-proxy would drop what reached a node without the Pod. A client
// connects through addr every 20 ms meanwhile: every connection must be
// answered by node's Pod.
func checkLocalAcrossAgentRestarts(t *testing.T, c *realcluster.Cluster, addr netip.Addr, node string) {
	ctx := t.Context()
	client := lbClient(c.Clients["client"])
	client.Timeout = time.Second
	during := keepSurveying(t, client, url(addr))
	restarts := map[string]int32{}
	var pods []*corev1.Pod
	for _, n := range c.Nodes {
		if !n.LoadBalancer {
			continue
		}
		pod, id, err := c.AgentContainer(ctx, n.Name)
		if err != nil {
			t.Fatal(err)
		}
		restarts[pod.Name] = pod.Status.ContainerStatuses[0].RestartCount
		pods = append(pods, pod)
		if err := n.KillContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, pod := range pods {
			p, err := c.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil || len(p.Status.ContainerStatuses) == 0 {
				return false, nil
			}
			if st := p.Status.ContainerStatuses[0]; st.RestartCount <= restarts[pod.Name] || !st.Ready {
				return false, nil
			}
		}
		return true, nil
	})
	time.Sleep(5 * time.Second) // the restarted agents' first syncs and probes are over
	got := during()
	if err != nil {
		t.Fatalf("the agents' containers were not restarted and ready: %v", err)
	}
	switch total := got.total(); {
	case len(got.failed) > 0:
		t.Errorf("%d of %d connections failed while both agents restarted (answers by node %v); first: %s", len(got.failed), total, got.answers, got.failed[0])
	case got.answers[node] != total || total == 0:
		t.Errorf("answers by node %v, want all from %s", got.answers, node)
	}
	t.Logf("while both agents were killed and restarted: %d connections through %s, answers by node %v", got.total(), addr, got.answers)
}

// checkLocalSwitch: a Service whose only Pod runs on node-2 switches from
// externalTrafficPolicy Cluster (every node forwards to the Pod) to Local.
// kube-proxy on the other nodes starts dropping on its own schedule, while
// the agents keep sending to every node until they have probed the new
// healthCheckNodePort: the connections that fail in between are measured
// and logged, not bounded (they depend on both components' timing). Once
// every load-balancer host reports the Local generation programmed, 200
// connections in a row must each be answered, which they are only if no
// node without the Pod gets one.
func checkLocalSwitch(t *testing.T, c *realcluster.Cluster, dyn dynamic.Interface) {
	ctx := t.Context()
	const node, name, want = "node-2", "switch", 200
	vip := c.Opts.Subnet4.Addr().As4()
	vip[3] = 217 // requested, near the end of the pool, as in checkLocalFromTheStart
	addr := netip.AddrFrom4(vip)
	createEcho(t, c, name, 1, map[string]string{corev1.LabelHostname: node})
	if err := c.WaitDeploymentReady(ctx, echoNS, name); err != nil {
		t.Fatal(err)
	}
	exposeProxy(t, c, name, func(svc *corev1.Service) {
		svc.Annotations[annotation.LoadBalancerIPs] = addr.String()
	})
	r := newReceivers(t, c)
	client := lbClient(c.Clients["client"])
	client.Timeout = time.Second
	untilSpread(t, client, r, url(addr), "Cluster: other nodes forward too", func(got map[string]int) bool {
		return got["error"] == 0 && len(got) >= 2
	})

	type attempt struct {
		start time.Time
		err   error
	}
	var (
		mu       sync.Mutex
		attempts []attempt
	)
	cctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for cctx.Err() == nil {
			start := time.Now()
			_, err := get(cctx, client, url(addr))
			if cctx.Err() != nil {
				return
			}
			mu.Lock()
			attempts = append(attempts, attempt{start, err})
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	})
	defer func() { stop(); wg.Wait() }()
	time.Sleep(time.Second)
	switched := time.Now()
	patch := `{"spec":{"externalTrafficPolicy":"Local"}}`
	if _, err := c.Client.CoreV1().Services(echoNS).Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		lb, err := lbapi.NewClient(dyn).Get(ctx, echoNS, name)
		if err != nil || lb.Spec.ExternalTrafficPolicy != string(corev1.ServiceExternalTrafficPolicyLocal) {
			return false, nil
		}
		hosts := 0
		for _, h := range lb.Status.Hosts {
			for _, cond := range h.Conditions {
				if cond.Type == "Programmed" {
					if cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != lb.Generation {
						return false, nil
					}
					hosts++
				}
			}
		}
		return hosts == 2, nil
	})
	if err != nil {
		t.Fatalf("the Local generation of %s was not programmed by both hosts: %v", name, err)
	}
	programmed := time.Now()
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, a := range attempts {
			if !a.start.Before(programmed) {
				n++
			}
		}
		return n >= want, nil
	})
	stop()
	wg.Wait()
	if err != nil {
		t.Fatalf("fewer than %d connections through %s within 2 minutes of the switch", want, addr)
	}
	var during, after []attempt
	total := 0
	for _, a := range attempts {
		switch {
		case a.start.Before(switched):
		case a.start.Before(programmed):
			total++
			if a.err != nil {
				during = append(during, a)
			}
		case a.err != nil:
			after = append(after, a)
		}
	}
	if len(during) > 0 {
		t.Logf("Cluster→Local: %d of %d connections failed while the agents switched (%s after the change; failures from +%s to +%s); first: %v",
			len(during), total, programmed.Sub(switched).Round(time.Millisecond),
			during[0].start.Sub(switched).Round(time.Millisecond), during[len(during)-1].start.Sub(switched).Round(time.Millisecond), during[0].err)
	} else {
		t.Logf("Cluster→Local: none of %d connections failed while the agents switched (%s after the change)", total, programmed.Sub(switched).Round(time.Millisecond))
	}
	if len(after) > 0 {
		t.Errorf("%d connections failed after both hosts programmed Local; first at +%s: %v", len(after), after[0].start.Sub(programmed).Round(time.Millisecond), after[0].err)
	}
}

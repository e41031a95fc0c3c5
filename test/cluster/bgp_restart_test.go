package clustertest

import (
	"context"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
)

// checkRestartAlone: lb-1 alone advertises the address of Service "alone"
// (pool "edge", lb-1 labelled), to a router that helps with BGP graceful
// restart (graceful-restart = true on the IPv4 peer, FRR's default helper
// mode). lb-1's agent Pod is deleted (SIGTERM, as a rolling update does)
// while the client opens new connections without pause and holds twelve:
// the stopping agent leaves the route at the router and its rules in
// place, the router keeps the route (stale) while no agent runs, and the
// next agent, restarting, advertises it again before its End-of-RIB: no
// new connection fails, no held one breaks, and the route never leaves
// lb-1. Without graceful restart this is an outage from the withdrawal to
// the next agent's first advertisement.
func (s *bgpScenario) checkRestartAlone(t *testing.T) {
	ctx := t.Context()
	setNodeLabel(ctx, t, s.c, "lb-1", edgeLabel, true)
	defer setNodeLabel(context.Background(), t, s.c, "lb-1", edgeLabel, false)
	alone := deploy(t, s.c, "alone", 2, nil, inPool("edge"), passthrough)
	vip := alone.vip(t, false)
	prefix := netip.PrefixFrom(vip, vip.BitLen())
	s.waitNexthops(t, vip, s.lbs[0])
	waitServing(t, lbClient(s.client), url(vip))
	// The next agent learns what lb-1 advertised from the status.
	eventually(t, "lb-1 reported announcing "+vip.String(), func(ctx context.Context) bool {
		lb, err := lbObjects(t, s.c).Get(ctx, echoNS, "alone")
		return err == nil && slices.ContainsFunc(lb.Status.Hosts, func(h v1alpha1.HostStatus) bool {
			return h.Name == "lb-1" && slices.Contains(h.Announcing, vip.String())
		})
	})
	conns := s.openConns(t, vip, 12)
	old, _, err := s.c.AgentContainer(ctx, "lb-1")
	if err != nil {
		t.Fatal(err)
	}

	var routeMissing atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	stream := startConnStream(ctx, s.client, vip)
	wg.Go(func() { // the router's kernel route, every 50 ms
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if hops, err := s.r.Nexthops(ctx, prefix); err == nil && !slices.Equal(hops, addrsOf(vip, s.lbs[0])) {
				routeMissing.Add(1)
			}
		}
	})
	// The stopping agent's log, kept while its Pod's directory lasts.
	var oldLog atomic.Value
	for _, l := range s.c.Node("lb-1").PodLogs() {
		if strings.Contains(l, old.Name) {
			wg.Go(func() {
				for {
					if b, err := os.ReadFile(l); err == nil {
						oldLog.Store(string(b))
					}
					select {
					case <-stop:
						return
					case <-time.After(100 * time.Millisecond):
					}
				}
			})
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			s, _ := oldLog.Load().(string)
			t.Logf("the stopped agent's log:\n%s", s)
		}
	})
	deleted := time.Now()
	if err := s.c.Client.CoreV1().Pods(old.Namespace).Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The next agent runs, and the router holds the route from it, not
	// stale.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pod, _, err := s.c.AgentContainer(ctx, "lb-1")
		return err == nil && pod.Name != old.Name, nil
	})
	if err != nil {
		t.Fatalf("no new agent on lb-1: %v", err)
	}
	var wasStale bool
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		out, err := s.r.VTY(ctx, "show bgp ipv4 unicast "+prefix.String()+" json")
		if err != nil {
			return false, nil
		}
		stale := strings.Contains(string(out), `"stale":true`)
		wasStale = wasStale || stale
		return !stale && strings.Contains(string(out), `"paths"`), nil
	})
	if err != nil {
		t.Fatalf("the router's route to %s from lb-1 is stale or gone a minute after the next agent started: %v", prefix, err)
	}
	took := time.Since(deleted)
	if pod, _, err := s.c.AgentContainer(ctx, "lb-1"); err == nil {
		t.Logf("agent Pod %s deleted; %s runs now", old.Name, pod.Name)
	}
	time.Sleep(2 * time.Second)
	ok, failed, first := stream.end()
	close(stop)
	wg.Wait()
	t.Logf("lb-1's agent restarted alone in %s (route seen stale: %v): %d new connections answered, %d failed; route not via lb-1 alone in %d samples",
		took.Round(time.Millisecond), wasStale, ok, failed, routeMissing.Load())
	if failed > 0 || ok == 0 {
		t.Errorf("%d of %d new connections failed while lb-1's agent restarted; first: %v", failed, failed+ok, first)
	}
	if routeMissing.Load() > 0 {
		t.Errorf("the router's route to %s left lb-1 in %d samples", prefix, routeMissing.Load())
	}
	expectAnswered(t, conns, "agent restarted alone")
}

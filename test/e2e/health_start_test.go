package e2e

import (
	"context"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/annotation"
	"github.com/groundcloud/groundcloud/internal/lbapi"
)

// TestLocalTrafficFromTheStart: a Local Service whose only endpoint is on
// node-2 (the health ports of node-1 and node-3 answer 503) never sends a
// new connection to node-1 or node-3 — not right after it is created, not
// while the agent restarts, not right after it switches from Cluster to
// Local. Counts of answers per node, no timing.
func TestLocalTrafficFromTheStart(t *testing.T) {
	env := startLBEnv(t)
	env.setUnhealthy(t, "node-1.32001.unhealthy", true)
	env.setUnhealthy(t, "node-3.32001.unhealthy", true)
	vip := netip.MustParseAddr("192.0.2.221") // requested, so that clients try it before it exists
	addr := netip.AddrPortFrom(vip, 8080)
	requested := withAnnotation(annotation.LoadBalancerIPs, vip.String())

	t.Run("a new Local Service", func(t *testing.T) {
		c := startConnecting(t, env, addr)
		env.create(t, newService("fresh", withPort(v1.ProtocolTCP, 8080, env.nodePort(t)), withLocalTraffic(healthNodePort), requested))
		c.waitAnswers(t, 200)
		c.expectOnly(t, "node-2")
	})

	t.Run("an agent killed and started again", func(t *testing.T) {
		c := startConnecting(t, env, addr)
		c.waitAnswers(t, 20)
		syncs := env.agentLogCount(t, "Synced data plane")
		if err := syscall.Kill(-env.Agent(0).Pid(), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-env.Agent(0).Done()
		c.mark() // only answers from here on count
		if err := env.StartAgent(t.Context(), 0); err != nil {
			t.Fatal(err)
		}
		eventually(t, "a sync of the restarted agent", func() bool { return env.agentLogCount(t, "Synced data plane") > syncs })
		c.waitAnswers(t, 200)
		c.expectOnly(t, "node-2")
		// Its rules stayed in the kernel: the restart must not break them.
		if n := c.failures(); n > 0 {
			t.Errorf("%d connections failed while the agent restarted (its rules and address stayed in the kernel); last error: %v", n, c.lastError())
		}
	})

	t.Run("an agent stopped and started again", func(t *testing.T) {
		c := startConnecting(t, env, addr)
		c.waitAnswers(t, 20)
		if err := env.Agent(0).Stop(); err != nil {
			t.Fatalf("agent exit: %v", err)
		}
		c.mark() // it removed its rules: connections fail until it is back
		if err := env.StartAgent(t.Context(), 0); err != nil {
			t.Fatal(err)
		}
		c.waitAnswers(t, 200)
		c.expectOnly(t, "node-2")
	})

	t.Run("a Service switched from Cluster to Local", func(t *testing.T) {
		env.delete(t, "fresh") // frees the health check node port
		eventually(t, "LoadBalancer fresh deleted", func() bool { return !env.lbObjectExists(t, "fresh") })
		env.create(t, newService("switch", withPort(v1.ProtocolTCP, 8080, env.nodePort(t)), requested))
		env.nodesReached(t, addr, env.nodeNames()...)
		c := startConnecting(t, env, addr)
		updateService(t, env, "switch", withLocalTraffic(healthNodePort))
		env.waitProgrammed(t, "switch", func(lb *v1alpha1.LoadBalancer) bool { return lb.Spec.ExternalTrafficPolicy == "Local" })
		c.mark() // the agent forwards the Local generation from here on
		c.waitAnswers(t, 200)
		c.expectOnly(t, "node-2")
	})
}

// agentLogCount counts the lines of the LB host's agent log containing text.
func (env *lbEnv) agentLogCount(t *testing.T, text string) int {
	t.Helper()
	b, err := os.ReadFile(env.Agent(0).LogPath)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), text)
}

// waitProgrammed waits until the LB host reports Programmed for the
// generation of LoadBalancer name that satisfies spec.
func (env *lbEnv) waitProgrammed(t *testing.T, name string, spec func(*v1alpha1.LoadBalancer) bool) {
	t.Helper()
	eventually(t, "LoadBalancer "+name+" programmed", func() bool {
		u, err := env.dyn.Resource(lbapi.Resource).Namespace("default").Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		lb, err := lbapi.Type.FromUnstructured(u)
		if err != nil || !spec(lb) {
			return false
		}
		for _, h := range lb.Status.Hosts {
			c := meta.FindStatusCondition(h.Conditions, v1alpha1.ConditionProgrammed)
			if h.Name == env.lb.Name && c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == lb.Generation {
				return true
			}
		}
		return false
	})
}

// connector opens one connection after another from the inside client to
// an address and counts who answers, until the test ends.
type connector struct {
	mu      sync.Mutex
	answers map[string]int
	failed  int
	lastErr error
}

func startConnecting(t *testing.T, env *lbEnv, addr netip.AddrPort) *connector {
	c := &connector{answers: map[string]int{}}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			attempt, stop := context.WithTimeout(ctx, 500*time.Millisecond)
			node, _, err := who(attempt, env.inside, addr)
			stop()
			if ctx.Err() != nil {
				return
			}
			c.mu.Lock()
			if err != nil {
				c.failed++
				c.lastErr = err
			} else {
				c.answers[node]++
			}
			c.mu.Unlock()
			if err != nil {
				time.Sleep(10 * time.Millisecond) // refused at once before the address exists
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return c
}

// mark forgets what came before.
func (c *connector) mark() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.answers, c.failed, c.lastErr = map[string]int{}, 0, nil
}

func (c *connector) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.answers {
		n += v
	}
	return n
}

// waitAnswers waits until n connections were answered since the last mark.
func (c *connector) waitAnswers(t *testing.T, n int) {
	t.Helper()
	eventually(t, "answered connections", func() bool { return c.total() >= n })
}

func (c *connector) failures() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failed
}

func (c *connector) lastError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastErr
}

// expectOnly fails the test unless every answer came from node.
func (c *connector) expectOnly(t *testing.T, node string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	t.Logf("answers per node: %v (%d failed, last error %v)", c.answers, c.failed, c.lastErr)
	for n, count := range c.answers {
		if n != node {
			t.Errorf("%d connections reached %s, which has no endpoint; want all on %s", count, n, node)
		}
	}
}

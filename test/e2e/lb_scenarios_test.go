package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundcloud/groundcloud/internal/annotation"
)

// TestLoadBalancer: what the controller manager and the agent write for
// LoadBalancer Services on the apiserver-only test bed — addresses,
// LoadBalancer objects and their status, Events, metrics — and what a
// restarted controller manager does not write. Traffic is TestCluster's
// (test/cluster), through real kube-proxy and Pods: TCP and UDP over IPv4
// and IPv6, a node drained by its health, Local policy, excluded and
// deleted nodes, requested and shared addresses, source ranges, a deleted
// Service's rules and address removed, the apiserver away, a clean agent
// shutdown. The subtests share one environment and run in order.
func TestLoadBalancer(t *testing.T) {
	env := startLBEnv(t)
	ctx := t.Context()

	t.Run("addresses from the pool, shown by kubectl get loadbalancers", func(t *testing.T) {
		env.create(t, newService("web", withPort(v1.ProtocolTCP, 80, env.nodePort(t)), withPort(v1.ProtocolUDP, 53, nodePortUDP)))
		web := env.addresses(t, "web", 1)[0]
		if !web.Is4() || !inPool(web) {
			t.Fatalf("web got %s, want an IPv4 address of pool default", web)
		}
		env.create(t, newService("dual", withPort(v1.ProtocolTCP, 80, env.nodePort(t)), withDualStack()))
		if addrs := env.addresses(t, "dual", 2); !addrs[0].Is4() || !addrs[1].Is6() || !inPool(addrs[0]) || !inPool(addrs[1]) {
			t.Fatalf("dual got %v, want an IPv4 and an IPv6 address of pool default", addrs)
		}
		env.create(t, newService("local", withPort(v1.ProtocolTCP, 8080, env.nodePort(t)), withLocalTraffic(healthNodePort)))
		env.addresses(t, "local", 1)
		eventually(t, "LoadBalancer web Ready", func() bool { return env.ready(t, "web") == metav1.ConditionTrue })
		out, err := env.cp.Kubectl(ctx, "get", "loadbalancers", "-n", "default", "web", "--no-headers")
		if err != nil {
			t.Fatalf("kubectl get loadbalancers: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), web.String()) || !strings.Contains(string(out), "True") || !strings.Contains(string(out), "80/TCP,53/UDP") {
			t.Errorf("kubectl get loadbalancers does not show %s Ready:\n%s", web, out)
		}
	})

	t.Run("a requested IP is honoured; one outside every pool is refused with an event", func(t *testing.T) {
		env.create(t, newService("pinned", withPort(v1.ProtocolTCP, 80, env.nodePort(t)), withAnnotation(annotation.LoadBalancerIPs, "192.0.2.225")))
		if got := env.addresses(t, "pinned", 1)[0]; got != netip.MustParseAddr("192.0.2.225") {
			t.Fatalf("pinned got %s, want 192.0.2.225 (from the non-auto-assign pool)", got)
		}

		env.create(t, newService("outside", withPort(v1.ProtocolTCP, 80, env.nodePort(t)), withAnnotation(annotation.LoadBalancerIPs, "203.0.113.5")))
		env.warning(t, "outside", "203.0.113.5")
		env.expectNoAddress(t, "outside")
	})

	t.Run("services share an address on different ports; a port conflict is refused", func(t *testing.T) {
		key := withAnnotation(annotation.AllowSharedIP, "team-a")
		env.create(t, newService("share-a", withPort(v1.ProtocolTCP, 80, env.nodePort(t)), key))
		a := env.addresses(t, "share-a", 1)[0]
		env.create(t, newService("share-b", withPort(v1.ProtocolTCP, 81, env.nodePort(t)), key, withAnnotation(annotation.LoadBalancerIPs, a.String())))
		if b := env.addresses(t, "share-b", 1)[0]; b != a {
			t.Fatalf("share-b got %s, want the shared %s", b, a)
		}

		env.create(t, newService("share-c", withPort(v1.ProtocolTCP, 80, env.nodePort(t)), key, withAnnotation(annotation.LoadBalancerIPs, a.String())))
		env.warning(t, "share-c", a.String())
		env.expectNoAddress(t, "share-c")

		env.testSharingKeyStaysInItsNamespace(t, a, "team-a")
	})

	t.Run("an address a reload leaves outside its pool is kept and reported until the range is back", env.testOrphanedAddress)

	t.Run("restarting the controller manager writes nothing and duplicates nothing", func(t *testing.T) {
		services := []string{"web", "local", "pinned", "share-a", "share-b", "dual"}
		before := env.ensuredCounts(t, services)
		writesBefore := env.lbWrites(t)
		env.restartCCM(t)
		eventually(t, "every service re-ensured after the restart", func() bool {
			now := env.ensuredCounts(t, services)
			for _, s := range services {
				if now[s] <= before[s] {
					return false
				}
			}
			return true
		})
		if after, lines := env.lbWriteLines(t); after != writesBefore {
			t.Logf("apiserver write counters: %s", strings.Join(lines, "\n"))
			t.Errorf("LoadBalancer writes by the restarted controller manager: %d (before %d, after %d), want 0", after-writesBefore, writesBefore, after)
		}
		env.create(t, newService("after-restart", withPort(v1.ProtocolTCP, 80, env.nodePort(t))))
		fresh := env.addresses(t, "after-restart", 1)[0]
		for _, s := range services {
			for _, a := range env.addresses(t, s, 1) {
				if a == fresh && !strings.HasPrefix(s, "share-") {
					t.Errorf("after-restart got %s, already held by %s", fresh, s)
				}
			}
		}
	})
}

// expectNoAddress checks, a few seconds after its warning, that the Service
// has no address and no LoadBalancer object.
func (env *lbEnv) expectNoAddress(t *testing.T, name string) {
	t.Helper()
	time.Sleep(2 * time.Second)
	svc, err := env.client.CoreV1().Services("default").Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(svc.Status.LoadBalancer.Ingress) != 0 {
		t.Errorf("service %s got %v despite the error", name, svc.Status.LoadBalancer.Ingress)
	}
	if env.lbObjectExists(t, name) {
		t.Errorf("service %s has a LoadBalancer object despite the error", name)
	}
}

// ensuredCounts counts EnsuredLoadBalancer events per service.
func (env *lbEnv) ensuredCounts(t *testing.T, services []string) map[string]int32 {
	t.Helper()
	evs, err := env.client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{FieldSelector: "reason=EnsuredLoadBalancer"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int32{}
	for _, e := range evs.Items {
		n := e.Count
		if e.Series != nil && e.Series.Count > n {
			n = e.Series.Count
		}
		if n == 0 {
			n = 1
		}
		out[e.InvolvedObject.Name] += n
	}
	return out
}

// lbWrites reads from the apiserver's own metrics how many create, update,
// patch and delete requests LoadBalancer objects (not their status) got.
func (env *lbEnv) lbWrites(t *testing.T) int {
	n, _ := env.lbWriteLines(t)
	return n
}

func (env *lbEnv) lbWriteLines(t *testing.T) (int, []string) {
	t.Helper()
	body, err := env.client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	var lines []string
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `resource="loadbalancers"`) ||
			!strings.Contains(line, `subresource=""`) {
			continue
		}
		for _, verb := range []string{`verb="POST"`, `verb="PUT"`, `verb="PATCH"`, `verb="DELETE"`, `verb="APPLY"`, `verb="CREATE"`, `verb="UPDATE"`} {
			if strings.Contains(line, verb) {
				var n float64
				f := strings.Fields(line)
				if _, err := fmt.Sscan(f[len(f)-1], &n); err == nil {
					total += int(n)
					lines = append(lines, line)
				}
			}
		}
	}
	return total, lines
}

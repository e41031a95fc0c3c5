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
	cloudapi "k8s.io/cloud-provider/api"

	"github.com/groundcloud/groundcloud/internal/ipam"
	"github.com/groundcloud/groundcloud/internal/sandbox"
)

// TestLoadBalancer runs a LoadBalancer Service through the whole path: the
// controller manager assigns an address and writes the LoadBalancer object,
// the agent on the LB host programs nftables and holds the VIP, and a
// client in another namespace reaches the nodes through it. The subtests
// share one environment and run in order.
func TestLoadBalancer(t *testing.T) {
	env := startLBEnv(t)
	ctx := t.Context()
	all := env.nodeNames()

	var webVIP netip.Addr
	t.Run("traffic over TCP and UDP spreads over all nodes", func(t *testing.T) {
		env.create(t, newService("web", withPort(v1.ProtocolTCP, 80, env.nodePort(t)), withPort(v1.ProtocolUDP, 53, nodePortUDP)))
		addrs := env.addresses(t, "web", 1)
		webVIP = addrs[0]
		if !webVIP.Is4() || !inPool(webVIP) {
			t.Fatalf("web got %s, want an IPv4 address of pool default", webVIP)
		}
		env.nodesReached(t, netip.AddrPortFrom(webVIP, 80), all...)

		// The node sees the VIP as the source (SNAT to the VIP).
		_, seen, err := who(ctx, env.inside, netip.AddrPortFrom(webVIP, 80))
		if err != nil {
			t.Fatal(err)
		}
		if ap, err := netip.ParseAddrPort(seen); err != nil || ap.Addr() != webVIP {
			t.Errorf("node saw source %s, want the VIP %s", seen, webVIP)
		}

		udpNodes := map[string]bool{}
		for range 30 {
			n, err := whoUDP(ctx, env.inside, netip.AddrPortFrom(webVIP, 53))
			if err != nil {
				t.Fatalf("UDP through %s: %v", webVIP, err)
			}
			udpNodes[n] = true
		}
		if len(udpNodes) != len(all) {
			t.Errorf("UDP reached %v, want all of %v", udpNodes, all)
		}

		out, err := env.cp.Kubectl(ctx, "get", "loadbalancers", "-n", "default", "web", "--no-headers")
		if err != nil {
			t.Fatalf("kubectl get loadbalancers: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), webVIP.String()) || !strings.Contains(string(out), "True") || !strings.Contains(string(out), "80/TCP,53/UDP") {
			t.Errorf("kubectl get loadbalancers does not show %s Ready:\n%s", webVIP, out)
		}
	})

	t.Run("an unhealthy node gets no new connections until it recovers", func(t *testing.T) {
		env.setUnhealthy(t, "node-2.unhealthy", true)
		env.nodesReached(t, netip.AddrPortFrom(webVIP, 80), "node-1", "node-3")
		env.setUnhealthy(t, "node-2.unhealthy", false)
		env.nodesReached(t, netip.AddrPortFrom(webVIP, 80), all...)
	})

	t.Run("externalTrafficPolicy Local sends only to nodes whose health port answers", func(t *testing.T) {
		env.setUnhealthy(t, "node-1.32001.unhealthy", true)
		env.setUnhealthy(t, "node-3.32001.unhealthy", true)
		t.Cleanup(func() {
			env.setUnhealthy(t, "node-1.32001.unhealthy", false)
			env.setUnhealthy(t, "node-3.32001.unhealthy", false)
		})
		env.create(t, newService("local", withPort(v1.ProtocolTCP, 8080, env.nodePort(t)), withLocalTraffic(healthNodePort)))
		vip := env.addresses(t, "local", 1)[0]
		env.nodesReached(t, netip.AddrPortFrom(vip, 8080), "node-2")
	})

	t.Run("deleted or excluded nodes stop being backends", func(t *testing.T) {
		nodes := env.client.CoreV1().Nodes()
		n, err := nodes.Get(ctx, "node-2", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Labels[v1.LabelNodeExcludeBalancers] = "true"
		if _, err := nodes.Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		env.nodesReached(t, netip.AddrPortFrom(webVIP, 80), "node-1", "node-3")
		n, err = nodes.Get(ctx, "node-2", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		delete(n.Labels, v1.LabelNodeExcludeBalancers)
		if _, err := nodes.Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		env.nodesReached(t, netip.AddrPortFrom(webVIP, 80), all...)

		if err := nodes.Delete(ctx, "node-3", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		env.nodesReached(t, netip.AddrPortFrom(webVIP, 80), "node-1", "node-2")
		if err := sandbox.RegisterNode(ctx, env.client, "node-3", v1.ConditionTrue); err != nil {
			t.Fatal(err)
		}
		waitNode(t, env.client, "node-3", "initialised", func(n *v1.Node) bool { return !hasTaint(n, cloudapi.TaintExternalCloudProvider) })
		env.nodesReached(t, netip.AddrPortFrom(webVIP, 80), all...)
	})

	t.Run("a requested IP is honoured; one outside every pool is refused with an event", func(t *testing.T) {
		env.create(t, newService("pinned", withPort(v1.ProtocolTCP, 80, env.nodePort(t)), withAnnotation(ipam.AnnotationLoadBalancerIPs, "192.0.2.225")))
		if got := env.addresses(t, "pinned", 1)[0]; got != netip.MustParseAddr("192.0.2.225") {
			t.Fatalf("pinned got %s, want 192.0.2.225 (from the non-auto-assign pool)", got)
		}
		env.nodesReached(t, netip.MustParseAddrPort("192.0.2.225:80"), all...)

		env.create(t, newService("outside", withPort(v1.ProtocolTCP, 80, env.nodePort(t)), withAnnotation(ipam.AnnotationLoadBalancerIPs, "203.0.113.5")))
		env.warning(t, "outside", "203.0.113.5")
		env.expectNoAddress(t, "outside")
	})

	t.Run("services sharing an address on different ports both work; a port conflict is refused", func(t *testing.T) {
		key := withAnnotation(ipam.AnnotationAllowSharedIP, "team-a")
		env.create(t, newService("share-a", withPort(v1.ProtocolTCP, 80, env.nodePort(t)), key))
		a := env.addresses(t, "share-a", 1)[0]
		env.create(t, newService("share-b", withPort(v1.ProtocolTCP, 81, env.nodePort(t)), key, withAnnotation(ipam.AnnotationLoadBalancerIPs, a.String())))
		if b := env.addresses(t, "share-b", 1)[0]; b != a {
			t.Fatalf("share-b got %s, want the shared %s", b, a)
		}
		env.nodesReached(t, netip.AddrPortFrom(a, 80), all...)
		env.nodesReached(t, netip.AddrPortFrom(a, 81), all...)

		env.create(t, newService("share-c", withPort(v1.ProtocolTCP, 80, env.nodePort(t)), key, withAnnotation(ipam.AnnotationLoadBalancerIPs, a.String())))
		env.warning(t, "share-c", a.String())
		env.expectNoAddress(t, "share-c")

		env.testSharingKeyStaysInItsNamespace(t, a, "team-a")
	})

	t.Run("a dual-stack service carries traffic on both addresses", func(t *testing.T) {
		env.create(t, newService("dual", withPort(v1.ProtocolTCP, 80, env.nodePort(t)), withDualStack()))
		addrs := env.addresses(t, "dual", 2)
		if !addrs[0].Is4() || !addrs[1].Is6() || !inPool(addrs[0]) || !inPool(addrs[1]) {
			t.Fatalf("dual got %v, want an IPv4 and an IPv6 address of pool default", addrs)
		}
		env.nodesReached(t, netip.AddrPortFrom(addrs[0], 80), all...)
		env.nodesReached(t, netip.AddrPortFrom(addrs[1], 80), all...)
	})

	t.Run("source ranges block a client outside them", func(t *testing.T) {
		env.create(t, newService("ranged", withPort(v1.ProtocolTCP, 80, env.nodePort(t)), withSourceRanges(env.inside.Addr4.String()+"/32")))
		vip := env.addresses(t, "ranged", 1)[0]
		env.nodesReached(t, netip.AddrPortFrom(vip, 80), all...)
		for range 5 {
			if node, _, err := who(ctx, env.outsider, netip.AddrPortFrom(vip, 80)); err == nil {
				t.Fatalf("outsider reached %s through %s despite the source range", node, vip)
			}
		}
	})

	t.Run("deleting a service frees its address and removes its rules and VIP", func(t *testing.T) {
		vip := env.addresses(t, "ranged", 1)[0]
		env.delete(t, "ranged")
		eventually(t, "LoadBalancer ranged deleted", func() bool { return !env.lbObjectExists(t, "ranged") })
		eventually(t, "VIP and rules gone from the LB host", func() bool {
			return !strings.Contains(env.hostState(t), vip.String()+" ") && !strings.Contains(env.hostState(t), vip.String()+"/")
		})
		if _, _, err := who(ctx, env.inside, netip.AddrPortFrom(vip, 80)); err == nil {
			t.Errorf("%s still answers after its service was deleted", vip)
		}
		env.create(t, newService("reuse", withPort(v1.ProtocolTCP, 80, env.nodePort(t)), withAnnotation(ipam.AnnotationLoadBalancerIPs, vip.String())))
		if got := env.addresses(t, "reuse", 1)[0]; got != vip {
			t.Fatalf("reuse got %s, want the freed %s", got, vip)
		}
	})

	t.Run("an address a reload leaves outside its pool is kept and reported until the range is back", env.testOrphanedAddress)

	t.Run("restarting the controller manager writes nothing and duplicates nothing", func(t *testing.T) {
		services := []string{"web", "local", "pinned", "share-a", "share-b", "dual", "reuse"}
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
		env.nodesReached(t, netip.AddrPortFrom(fresh, 80), all...)
	})

	t.Run("with the apiserver down the agent keeps forwarding and follows health", func(t *testing.T) {
		if err := env.cp.StopAPIServer(); err != nil {
			t.Fatal(err)
		}
		env.nodesReached(t, netip.AddrPortFrom(webVIP, 80), all...)
		env.setUnhealthy(t, "node-1.unhealthy", true)
		env.nodesReached(t, netip.AddrPortFrom(webVIP, 80), "node-2", "node-3")
		env.setUnhealthy(t, "node-1.unhealthy", false)
		env.nodesReached(t, netip.AddrPortFrom(webVIP, 80), all...)
		if err := env.cp.StartAPIServer(t.Context()); err != nil {
			t.Fatal(err)
		}
		env.nodesReached(t, netip.AddrPortFrom(webVIP, 80), all...)
	})

	t.Run("a clean agent shutdown removes its tables and addresses", func(t *testing.T) {
		if !strings.Contains(env.hostState(t), webVIP.String()+"/32") {
			t.Fatalf("the LB host does not hold %s before the shutdown:\n%s", webVIP, env.hostState(t))
		}
		if err := env.Agent(0).Stop(); err != nil {
			t.Fatalf("agent exit: %v", err)
		}
		state := env.hostState(t)
		if strings.Contains(state, "table ip groundcloud {") || strings.Contains(state, "table ip6 groundcloud {") ||
			strings.Contains(state, webVIP.String()) || strings.Contains(state, "2001:db8:0:1::c8") {
			t.Errorf("after a clean shutdown the LB host still has our tables or addresses:\n%s", state)
		}
		if !strings.Contains(state, env.lb.Addr4.String()) {
			t.Errorf("the LB host lost its own address:\n%s", state)
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

package e2e

import (
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	cloudapi "k8s.io/cloud-provider/api"

	"github.com/groundcloud/groundcloud/internal/lbapi"
	"github.com/groundcloud/groundcloud/test/framework/apionly"
)

// TestNodesJoiningLater registers Nodes after the Service exists, as
// kubelet --cloud-provider=external does on a machine added to a running
// cluster, and checks that each carries traffic through the VIP once the
// controller manager has initialised it, whatever order its taint removal,
// providerID, addresses and Ready condition arrive in, and with no other
// Node changing afterwards to wake anything up. The subtests run in order:
// each new Node is a Node change that could hide a missed earlier one, so
// each waits for its own.
//
// Nodes the inventory does not list are initialised from what they report:
// when kubelet reports their addresses after the controller manager has
// set the providerID and removed the taint, the service controller asks
// for no sync, which is how the Node was missed.
//
// It stays on the apiserver-only test bed because a real kubelet picks one
// order for itself; TestCluster has a real kubelet joining the running
// cluster, and a deleted Node no longer a backend.
func TestNodesJoiningLater(t *testing.T) {
	env := startLBEnv(t, func(o *apionly.Options) {
		o.Nodes, o.Unregistered = 7, 4
		o.Unlisted = []string{"node-4", "node-6", "node-7"}
	})
	backends := env.nodeNames()
	env.create(t, newService("hello", withPort(v1.ProtocolTCP, 80, env.nodePort(t))))
	vip := netip.AddrPortFrom(env.addresses(t, "hello", 1)[0], 80)
	env.nodesReached(t, vip, backends...)

	join := func(t *testing.T, name string, register func()) {
		t.Helper()
		start := time.Now()
		register()
		backends = append(backends, name)
		env.nodesReached(t, vip, backends...)
		t.Logf("%s carried traffic %.1fs after its registration began", name, time.Since(start).Seconds())
	}
	internalIPs := func(name string) []v1.NodeAddress {
		for _, h := range env.late {
			if h.Name == name {
				return []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: h.Addr4.String()}, {Type: v1.NodeInternalIP, Address: h.Addr6.String()}}
			}
		}
		t.Fatalf("no host %s", name)
		return nil
	}
	initialised := func(t *testing.T, name string) {
		t.Helper()
		waitNode(t, env.client, name, "initialised", func(n *v1.Node) bool {
			return n.Spec.ProviderID != "" && !hasTaint(n, cloudapi.TaintExternalCloudProvider)
		})
	}

	t.Run("a node reporting its addresses before initialisation", func(t *testing.T) {
		join(t, "node-4", func() { createKubeletNode(t, env.client, "node-4", v1.ConditionTrue, internalIPs("node-4")...) })
	})

	t.Run("a node without addresses, which the inventory supplies", func(t *testing.T) {
		join(t, "node-5", func() { createKubeletNode(t, env.client, "node-5", v1.ConditionTrue) })
	})

	t.Run("a node registered NotReady that turns Ready with its addresses after initialisation", func(t *testing.T) {
		join(t, "node-6", func() {
			createKubeletNode(t, env.client, "node-6", v1.ConditionFalse)
			initialised(t, "node-6")
			setStatus(t, env, "node-6", v1.ConditionTrue, internalIPs("node-6"))
		})
	})

	t.Run("a node reporting its addresses after initialisation, after which no other node changes", func(t *testing.T) {
		// nodesReached waits up to a minute, during which this test changes
		// no Node: the new one must get in by itself.
		join(t, "node-7", func() {
			createKubeletNode(t, env.client, "node-7", v1.ConditionTrue)
			initialised(t, "node-7")
			setStatus(t, env, "node-7", v1.ConditionTrue, internalIPs("node-7"))
		})
	})
}

// setStatus reports the Node's Ready condition and addresses, as kubelet
// does.
func setStatus(t *testing.T, env *lbEnv, name string, ready v1.ConditionStatus, addresses []v1.NodeAddress) {
	t.Helper()
	nodes := env.client.CoreV1().Nodes()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := nodes.Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		n.Status.Conditions = []v1.NodeCondition{{
			Type: v1.NodeReady, Status: ready, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now,
		}}
		n.Status.Addresses = addresses
		_, err = nodes.UpdateStatus(t.Context(), n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestNodeChangeWritesNoLoadBalancer: a node that joins, and later leaves,
// reaches the agent's data plane (connections through every VIP reach
// exactly the current nodes, through the real nftables rules) without a
// single write to any LoadBalancer object or its status, and without an
// UpdatedLoadBalancer Event: the objects do not list nodes, the agent
// reads the Nodes itself, and UpdateLoadBalancer has nothing to do. On a
// version whose LoadBalancers listed their nodes, the agent could only
// learn of the node from a LoadBalancer write, so every VIP reaching it
// implies writes.
func TestNodeChangeWritesNoLoadBalancer(t *testing.T) {
	env := startLBEnv(t, func(o *apionly.Options) { o.Nodes, o.Unregistered = 4, 1 })
	ctx := t.Context()
	backends := env.nodeNames()
	names := []string{"alpha", "beta", "gamma"}
	var vips []netip.AddrPort
	for _, name := range names {
		env.create(t, newService(name, withPort(v1.ProtocolTCP, 80, env.nodePort(t))))
	}
	for _, name := range names {
		vips = append(vips, netip.AddrPortFrom(env.addresses(t, name, 1)[0], 80))
		eventually(t, "LoadBalancer "+name+" Ready", func() bool { return env.ready(t, name) == metav1.ConditionTrue })
	}
	for _, vip := range vips {
		env.nodesReached(t, vip, backends...)
	}
	late := env.late[0]

	for _, step := range []struct {
		name   string
		change func()
		want   []string
	}{
		{name: "a node joins", change: func() {
			createKubeletNode(t, env.client, late.Name, v1.ConditionTrue,
				v1.NodeAddress{Type: v1.NodeInternalIP, Address: late.Addr4.String()}, v1.NodeAddress{Type: v1.NodeInternalIP, Address: late.Addr6.String()})
		}, want: append(slices.Clone(backends), late.Name)},
		{name: "the node leaves", change: func() {
			if err := env.client.CoreV1().Nodes().Delete(ctx, late.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, want: backends},
	} {
		t.Run(step.name, func(t *testing.T) {
			before, writes := env.watchLoadBalancerWrites(t)
			events := env.countEvents(t, "UpdatedLoadBalancer")
			step.change()
			for _, vip := range vips {
				env.nodesReached(t, vip, step.want...)
			}
			// Whatever a write would follow the change with has had the
			// time to come: the agent reached every VIP's data plane, and
			// a status write follows a sync at once.
			time.Sleep(3 * time.Second)
			if n := writes(); n != 0 {
				t.Errorf("%d LoadBalancer watch events (object or status writes) after the node change, want 0", n)
			}
			for name, rv := range before {
				if got := env.loadBalancer(t, name).ResourceVersion; got != rv {
					t.Errorf("LoadBalancer %s: resourceVersion %s, was %s before the node change", name, got, rv)
				}
			}
			if n := env.countEvents(t, "UpdatedLoadBalancer") - events; n != 0 {
				t.Errorf("%d UpdatedLoadBalancer Events after the node change, want 0", n)
			}
		})
	}
}

// watchLoadBalancerWrites waits until no LoadBalancer has changed for 3 s,
// then returns each one's resourceVersion and a count of the watch events
// (every create, update, status write or delete) since.
func (env *lbEnv) watchLoadBalancerWrites(t *testing.T) (map[string]string, func() int) {
	t.Helper()
	lbs := env.dyn.Resource(lbapi.Resource).Namespace("default")
	var list *unstructured.UnstructuredList
	still := time.Time{}
	eventually(t, "LoadBalancers unchanged for 3 s", func() bool {
		l, err := lbs.List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		if list == nil || l.GetResourceVersion() != list.GetResourceVersion() && changedItems(list, l) {
			list, still = l, time.Now()
			return false
		}
		list = l
		return time.Since(still) >= 3*time.Second
	})
	before := map[string]string{}
	for _, it := range list.Items {
		before[it.GetName()] = it.GetResourceVersion()
	}
	w, err := lbs.Watch(t.Context(), metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	var mu sync.Mutex
	var seen []string
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type == watch.Bookmark {
				continue
			}
			what := string(ev.Type)
			if u, ok := ev.Object.(*unstructured.Unstructured); ok {
				what += " " + u.GetName() + " resourceVersion " + u.GetResourceVersion()
			}
			mu.Lock()
			seen = append(seen, what)
			mu.Unlock()
		}
	}()
	return before, func() int {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range seen {
			t.Logf("LoadBalancer watch: %s", s)
		}
		return len(seen)
	}
}

// changedItems reports whether a LoadBalancer of b has another
// resourceVersion than in a, or is new or gone.
func changedItems(a, b *unstructured.UnstructuredList) bool {
	if len(a.Items) != len(b.Items) {
		return true
	}
	rv := map[string]string{}
	for _, it := range a.Items {
		rv[it.GetName()] = it.GetResourceVersion()
	}
	for _, it := range b.Items {
		if rv[it.GetName()] != it.GetResourceVersion() {
			return true
		}
	}
	return false
}

// countEvents counts the Events in namespace default with reason, summing
// their counts.
func (env *lbEnv) countEvents(t *testing.T, reason string) int {
	t.Helper()
	evs, err := env.client.CoreV1().Events("default").List(t.Context(), metav1.ListOptions{FieldSelector: "reason=" + reason})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs.Items {
		n += int(max(e.Count, 1))
	}
	return n
}

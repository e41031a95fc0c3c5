package e2e

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	cloudapi "k8s.io/cloud-provider/api"

	"github.com/groundcloud/groundcloud/internal/sandbox"
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
func TestNodesJoiningLater(t *testing.T) {
	env := startLBEnv(t, func(o *sandbox.Options) {
		o.Nodes, o.Unregistered = 7, 4
		o.Unlisted = []string{"node-4", "node-6", "node-7"}
	})
	ctx := t.Context()
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

	t.Run("a node that leaves stops carrying traffic", func(t *testing.T) {
		if err := env.client.CoreV1().Nodes().Delete(ctx, "node-4", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		backends = slices.DeleteFunc(backends, func(n string) bool { return n == "node-4" })
		env.nodesReached(t, vip, backends...)
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

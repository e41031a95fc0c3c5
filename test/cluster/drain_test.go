package clustertest

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/groundcloud/groundcloud/test/framework/availability"
	"github.com/groundcloud/groundcloud/test/framework/realcluster"
)

// checkDrainAndReboot: maintenance of a load-balancer host, as an
// administrator does it with two hosts (docs/high-availability.md,
// "Maintenance: drain and reboot"): `kubectl drain` (the Node cordoned,
// its Pods but the DaemonSets' evicted) moves every address it held to the
// other host before anything stops; the machine is then switched off and
// on again (its agent restarted), and `kubectl uncordon` gives it its
// share back. Throughout, a
// client opens a new connection every 20 ms to a passthrough and a proxy
// Service and holds four to each: none fails, none breaks, some host holds
// each address at every moment, and the drained host holds none from the
// drain until it is uncordoned, nor does it draw the client back to itself
// once another host has the address. The hosts are no backends meanwhile (the
// exclusion label): what is measured is their load-balancer role.
func checkDrainAndReboot(t *testing.T, c *realcluster.Cluster, dyn dynamic.Interface) {
	ctx := t.Context()
	// The load-balancer hosts are Nodes here; as backends, the
	// connections their own kube-proxy carries end with a reboot, as any
	// Node's do (docs/high-availability.md says so). This check is about
	// their other role: they are no backends while it runs.
	for _, h := range lbHosts(c) {
		setNodeLabel(ctx, t, c, h.Name, corev1.LabelNodeExcludeBalancers, true)
		t.Cleanup(func() { setNodeLabel(context.Background(), t, c, h.Name, corev1.LabelNodeExcludeBalancers, false) })
	}
	s := newHAScenario(t, c, dyn, "drain")
	defer s.stop()
	// New connections count as in the rolling update (checkAgentsRolledOut):
	// failed when not connected within rolloutTimeout; slow ones logged.
	svcs := s.startForwarded(t, "drain", rolloutTimeout)
	var vips []netip.Addr
	for _, r := range svcs {
		vips = append(vips, r.vip)
	}
	before := s.settle(t, vips, 2*time.Second)
	// The host to drain: one that holds some of the addresses.
	host := before[vips[0]]
	t.Logf("holders before the drain: %v; draining %s", before, host)

	// What the client hears: which host tells it to send an address's
	// packets where.
	claims, err := availability.WatchClaims(s.client)
	if err != nil {
		t.Fatal(err)
	}
	defer claims.Stop()
	hostMAC, err := c.Node(host).Host.MAC()
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	drainNode(t, c, host)
	for _, v := range vips {
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			h, _ := hostHolds(t, c.Node(host).Host, v)
			return !h, nil
		}); err != nil {
			t.Fatalf("%s still holds %s a minute after the drain", host, v)
		}
	}
	drained := time.Now()
	t.Logf("%s drained; it held its last address %s after the cordon", host, drained.Sub(began).Round(time.Millisecond))
	// The host that took a proxy address over hands what it cannot
	// translate of the drained host's flows to the drained host for a
	// minute (docs/packet-path.md, "After a hand-over").
	after := s.owners(t, vips)
	for _, r := range svcs {
		if r.forwarding != "proxy" || before[r.vip] != host || !r.vip.Is4() {
			continue
		}
		want := fmt.Sprintf("%s : %s", r.vip, c.Node(host).Host.Addr4)
		out, err := c.Node(after[r.vip]).Host.Command(ctx, "nft", "list", "map", "ip", "groundcloud", "hand-over").CombinedOutput()
		if err != nil || !strings.Contains(string(out), want) {
			t.Errorf("%s took %s over from %s: its hand-over map lacks %q (%v):\n%s", after[r.vip], r.vip, host, want, err, out)
		}
	}
	time.Sleep(2 * time.Second)

	// The reboot: the machine off (its kubelet and containers stop, its
	// cable out), then on again.
	node := c.Node(host)
	if err := node.SetPower(false); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Second)
	if err := node.SetPower(true); err != nil {
		t.Fatal(err)
	}
	// Booted: its agent starts afresh (the test bed's machine keeps its
	// kernel, so the agent is restarted as the boot would).
	old, _, err := c.AgentContainer(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Client.CoreV1().Pods(metav1.NamespaceSystem).Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNewAgent(t, c, host, old.UID)
	time.Sleep(agentHoldDown + 2*time.Second)
	for _, v := range vips {
		if h, _ := hostHolds(t, node.Host, v); h {
			t.Errorf("%s holds %s after its reboot while cordoned", host, v)
		}
	}
	// The drained host handed its addresses over in silence: once another
	// host had announced one, it never drew the client back (an
	// announcement, or its kernel's answer while it still held it). A
	// client drawn back sends to a host that removes the address a moment
	// later, until its neighbour entry is renewed: with the machine
	// switched off, seconds of lost connections.
	for _, v := range vips {
		if cl, ok := claims.DrawnBack(v, hostMAC, began); ok {
			t.Errorf("%s claimed %s again at %s (%s after the drain began; active %v), after another host had taken it", host, v, cl.At.Format(time.StampMilli), cl.At.Sub(began).Round(time.Millisecond), cl.Active)
		}
	}
	// Taken before the call: the host may take its share back before the
	// call returns.
	uncordoned := time.Now()
	setUnschedulable(ctx, t, c, host, false)
	// Its share back, after its hold-down.
	s.waitReadyMembers(t, "drain", len(svcs))
	time.Sleep(agentHoldDown + 2*time.Second)
	after = s.owners(t, vips)
	t.Logf("holders after the uncordon: %v", after)

	for _, r := range svcs {
		what := fmt.Sprintf("%s drained, rebooted and uncordoned, %s (%s)", host, r.vip, r.forwarding)
		o := availability.Measure(r.client.Attempts(), began, began.Add(-500*time.Millisecond), time.Now().Add(-time.Second))
		t.Logf("%s: new connections: %d attempts, %d failed (%s), gap %s; holders: %s", what, o.Attempts, o.Failed, failedAt(r.client.Attempts(), began), o.Gap.Round(time.Millisecond), holderChanges(s.holders.Changes(r.vip, began), began))
		logFailures(t, what, r.client.Attempts(), began.Add(-500*time.Millisecond))
		if o.Failed > 0 || o.Unrecovered {
			t.Errorf("%s: %d of %d new connections failed (gap %s), want none", what, o.Failed, o.Attempts, o.Gap.Round(time.Millisecond))
		}
		slow := slowAttempts(r.client.Attempts(), began.Add(-500*time.Millisecond), time.Now().Add(-time.Second))
		t.Logf("%s: %d new connections took over %s (connected on a retransmitted SYN)", what, slow, slowConnect)
		expectHeld(t, r.client, what, began)
		checkHeldThroughout(t, r.vip, s.holders.Changes(r.vip, began), began, "drain")
		for _, ch := range s.holders.Changes(r.vip, began) {
			if ch.At.After(drained) && ch.At.Before(uncordoned) && slices.Contains(ch.Hosts, host) {
				t.Errorf("%s held by the drained %s at %s", r.vip, host, ch.At.Format(time.StampMilli))
			}
		}
	}
	if after[vips[0]] != host && before[vips[0]] == host {
		t.Logf("note: %s did not take %s back (held by %s): the share is by rendezvous hashing, not by history", host, vips[0], after[vips[0]])
	}
}

// drainNode does what `kubectl drain --ignore-daemonsets` does: it cordons
// node and evicts its Pods but the DaemonSets' (retrying while a
// PodDisruptionBudget refuses), and waits until they are gone.
func drainNode(t *testing.T, c *realcluster.Cluster, node string) {
	t.Helper()
	ctx := t.Context()
	setUnschedulable(ctx, t, c, node, true)
	t.Cleanup(func() { setUnschedulable(context.Background(), t, c, node, false) })
	pods, err := c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if daemon(&p) || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}}
		err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			err := c.Client.PolicyV1().Evictions(p.Namespace).Evict(ctx, ev)
			switch {
			case err == nil, apierrors.IsNotFound(err):
				return true, nil
			case apierrors.IsTooManyRequests(err):
				return false, nil // a PodDisruptionBudget: try again
			}
			return false, err
		})
		if err != nil {
			t.Fatalf("drain %s: evict %s/%s: %v", node, p.Namespace, p.Name, err)
		}
		t.Logf("drain %s: evicted %s/%s", node, p.Namespace, p.Name)
	}
}

func daemon(p *corev1.Pod) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" {
			return true
		}
	}
	_, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]
	return mirror
}

// setUnschedulable cordons (true) or uncordons node.
func setUnschedulable(ctx context.Context, t *testing.T, c *realcluster.Cluster, node string, on bool) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, on)
	if _, err := c.Client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Errorf("cordon %s (%t): %v", node, on, err)
	}
}

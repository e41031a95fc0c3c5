package clustertest

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/groundcloud/groundcloud/internal/annotation"
	"github.com/groundcloud/groundcloud/test/framework/availability"
	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

// splitBrain is TestCluster's failover between its two load-balancer hosts
// (Nodes with Pods of their own) when one host's kernel and the agents'
// view disagree: the owner's agent killed while its kernel keeps the
// addresses, then gossip between the two cut. Its Services are Local with
// their Pods on the workers, so that every host computes the same buckets
// and a failover moves no flow (see deployOnWorkers); proxy forwarding.
type splitBrain struct {
	*haScenario
	vips   []netip.Addr
	before map[netip.Addr]string
	// dualName is a dual-stack Service whose IPv6 address dual6 the first
	// address's owner holds, if one of four tried was placed so.
	dualName   string
	dual       []netip.Addr
	dual6      netip.Addr
	beforeDual map[netip.Addr]string
	// restarts is the killed agent's restart count before the kill.
	restarts int32
}

func newSplitBrain(s *haScenario) *splitBrain { return &splitBrain{haScenario: s} }

func localProxy(svc *corev1.Service) {
	svc.Annotations[annotation.Forwarding] = "proxy"
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
}

func requireDualStack(svc *corev1.Service) {
	svc.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
}

// owner is the host holding the first address before the failures, and
// other the other host.
func (s *splitBrain) owner() string { return s.before[s.vips[0]] }

func (s *splitBrain) other() string {
	for _, h := range s.lbs {
		if h.Name != s.owner() {
			return h.Name
		}
	}
	return ""
}

// checkShared: the agents find each other (in LoadBalancer status: deploy/
// gives them no seeds) and share four addresses; dual-stack Services are
// created until one's IPv6 address is on the host whose agent the next
// check kills, so that a stale IPv6 kernel is defended against too.
func (s *splitBrain) checkShared(t *testing.T) {
	s.vips = s.createServices(t, "app", 4)
	s.waitReadyMembers(t, "app", 4)
	for i, h := range s.lbs {
		eventually(t, "both agents Ready members in "+h.Name+"'s view", func(context.Context) bool {
			return s.metric(i, `groundcloud_membership_members{state="Ready"}`) == 2
		})
	}
	s.before = s.settle(t, s.vips, 2*time.Second)
	t.Logf("owners: %v", s.before)
	for i := range 4 {
		s.dualName = fmt.Sprintf("dual-%d", i)
		s.dual = s.createService(t, s.dualName, 2, requireDualStack)
		for _, v := range s.dual {
			if v.Is6() {
				s.dual6 = v
			}
			if _, err := s.holders.WaitHeld(t.Context(), v, 2*time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		if !s.dual6.IsValid() {
			t.Fatalf("dual-stack Service %s has no IPv6 address: %v", s.dualName, s.dual)
		}
		s.beforeDual = s.settle(t, s.dual, 2*time.Second)
		t.Logf("owners of %s: %v", s.dualName, s.beforeDual)
		if s.beforeDual[s.dual6] == s.owner() {
			break
		}
	}
}

// checkKilled: the owner's agent is killed (SIGKILL to its container)
// while its node's kubelet hangs, so that it stays dead, as a
// crash-looping agent is between two restarts: its kernel keeps the
// addresses and the nftables rules. The other host takes them over within
// about a second, defends them against the stale kernel (a SplitBrain
// Event, IPv4 and IPv6), new connections recover and the long-lived ones
// live on.
func (s *splitBrain) checkKilled(t *testing.T) {
	vip, owner, other := s.vips[0], s.owner(), s.other()
	node := s.c.Node(owner)
	pod, id, err := s.c.AgentContainer(t.Context(), owner)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := node.ContainerPID(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	s.restarts = pod.Status.ContainerStatuses[0].RestartCount
	c := s.startClient(t, vip, availability.Options{})
	time.Sleep(time.Second)
	if err := node.SetKubeletPaused(true); err != nil {
		t.Fatal(err)
	}
	// The next check lets it run again; this one, if it stops early.
	t.Cleanup(func() {
		if t.Failed() {
			_ = node.SetKubeletPaused(false)
		}
	})
	fault := time.Now()
	if err := node.KillContainer(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the agent's process gone", func(context.Context) bool { return !processExists(pid) })
	took, err := s.takenOver(vip, other, fault)
	if err != nil {
		t.Error(err)
	}
	o := expectRecovered(t, c, "kill -9", fault)
	t.Logf("kill -9: %s took %s over %s after the kill", other, vip, took)
	t.Logf("GAP kill-9 hosts=2 gap=%s recovered=%s", o.Gap, o.Recovered)
	for _, v := range s.vips {
		if h := s.holders.Now(v); !slices.Contains(h, other) {
			t.Errorf("%s held by %v after the kill, want %s among them", v, h, other)
		}
	}
	s.eventWith(t, "SplitBrain", "app-0", "its kernel still holds it")
	if s.beforeDual[s.dual6] == owner {
		s.eventWith(t, "SplitBrain", s.dualName, s.dual6.String()+" is also answered", "its kernel still holds it")
	} else {
		t.Logf("%s was not on the killed host (%s): no stale IPv6 kernel to defend against", s.dual6, s.beforeDual[s.dual6])
	}
}

// checkRestarted: the kubelet runs again and restarts the agent, which
// drops what it does not own and takes its share back once, after the
// hold-down: the owners are those before the kill, the split brain is
// reported resolved and the long-lived connections live on.
func (s *splitBrain) checkRestarted(t *testing.T) {
	vip, owner := s.vips[0], s.owner()
	c := s.startClient(t, vip, availability.Options{})
	time.Sleep(500 * time.Millisecond)
	restart := time.Now()
	if err := s.c.Node(owner).SetKubeletPaused(false); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, _, err := s.c.AgentContainer(ctx, owner)
		if err != nil || len(p.Status.ContainerStatuses) == 0 {
			return false, nil
		}
		st := p.Status.ContainerStatuses[0]
		return st.RestartCount > s.restarts && st.Ready, nil
	})
	if err != nil {
		t.Fatalf("the agent on %s was not restarted: %v", owner, err)
	}
	t.Logf("the agent on %s runs again %s after its kubelet", owner, time.Since(restart).Round(time.Millisecond))
	time.Sleep(agentHoldDown + 6*time.Second)
	for _, v := range s.vips {
		if m := availability.Moves(s.holders.Changes(v, restart)); m > 1 {
			t.Errorf("%s moved %d times after the restart: %v", v, m, s.holders.Changes(v, restart))
		}
	}
	if again := s.settle(t, s.vips, time.Second); fmt.Sprint(again) != fmt.Sprint(s.before) {
		t.Errorf("owners after the restart %v, want %v", again, s.before)
	}
	s.eventWith(t, "SplitBrainResolved", "app-0")
	for i, conn := range c.Conns() {
		if conn.Err != nil {
			t.Errorf("long-lived connection %d broke: %v", i, conn.Err)
		}
	}
}

// partition is the nftables table that cuts gossip (memberlist's port,
// UDP and TCP 7947) into a host.
const partition = "add table inet gcpartition { chain in { type filter hook input priority -200; policy accept; meta l4proto { tcp, udp } th dport 7947 drop; }; }"

// checkGossipCut: gossip between the two hosts is cut (a table in each
// host's own network namespace) while both reach the apiserver and the
// clients: each declares the other dead and claims everything; the guards
// see each other's claims and settle every address on its owner before
// the cut (the winner of the pair), IPv4 by ARP, IPv6 by Neighbor
// Discovery, with SplitBrain Events and metrics. When gossip is back, both
// are Ready members again and no address moves.
func (s *splitBrain) checkGossipCut(t *testing.T) {
	c := s.startClient(t, s.vips[0], availability.Options{})
	yields := func() float64 {
		return s.metric(0, `groundcloud_membership_split_brains_total{action="Yield"}`) +
			s.metric(1, `groundcloud_membership_split_brains_total{action="Yield"}`)
	}
	yieldsBefore := yields()
	time.Sleep(500 * time.Millisecond)
	cut := time.Now()
	for _, h := range s.lbs {
		nftIn(t, h, partition)
	}
	healed := false
	heal := func() {
		if healed {
			return
		}
		healed = true
		for _, h := range s.lbs {
			nftIn(t, h, "delete table inet gcpartition")
		}
	}
	t.Cleanup(func() {
		if !healed {
			for _, h := range s.lbs {
				_, _ = h.Command(context.Background(), "nft", "delete", "table", "inet", "gcpartition").CombinedOutput()
			}
		}
	})
	eventually(t, "a host yields in the split brain", func(context.Context) bool { return yields() > yieldsBefore })
	partitioned := s.settle(t, s.vips, 2*time.Second)
	if fmt.Sprint(partitioned) != fmt.Sprint(s.before) {
		t.Errorf("owners while partitioned %v, want %v", partitioned, s.before)
	}
	s.eventWith(t, "SplitBrain", "", "gossip between the two is cut")
	// IPv6: the loser of the pair withdraws the address (it saw the
	// winner's DAD probes), which then settles on the winner.
	s.eventWith(t, "SplitBrain", s.dualName, s.dual6.String()+" is also answered", "gossip between the two is cut", "withdraws it")
	if p := s.settle(t, s.dual, 2*time.Second); fmt.Sprint(p) != fmt.Sprint(s.beforeDual) {
		t.Errorf("owners of %s while partitioned %v, want %v", s.dualName, p, s.beforeDual)
	}
	o := availability.Measure(c.Attempts(), cut, cut, time.Now())
	t.Logf("split brain: %d attempts, %d failed, gap %s", o.Attempts, o.Failed, o.Gap)

	healedAt := time.Now()
	heal()
	time.Sleep(3 * time.Second)
	for i, h := range s.lbs {
		eventually(t, "both agents Ready members again in "+h.Name+"'s view, no split brain", func(context.Context) bool {
			return s.metric(i, `groundcloud_membership_members{state="Ready"}`) == 2 &&
				s.metric(i, `groundcloud_membership_split_brains`) == 0
		})
	}
	for _, v := range slices.Concat(s.vips, s.dual) {
		if m := availability.Moves(s.holders.Changes(v, healedAt)); m > 0 {
			t.Errorf("%s moved when gossip came back: %v", v, s.holders.Changes(v, healedAt))
		}
	}
	if again := s.settle(t, s.vips, time.Second); fmt.Sprint(again) != fmt.Sprint(s.before) {
		t.Errorf("owners after the heal %v, want %v", again, s.before)
	}
	if again := s.settle(t, s.dual, time.Second); fmt.Sprint(again) != fmt.Sprint(s.beforeDual) {
		t.Errorf("owners of %s after the heal %v, want %v", s.dualName, again, s.beforeDual)
	}
}

// nftIn runs an nft command in a host's network namespace.
func nftIn(t *testing.T, h *netlab.Host, cmd string) {
	t.Helper()
	out, err := h.Command(t.Context(), "nft", cmd).CombinedOutput()
	if err != nil {
		t.Fatalf("nft %s in %s: %v\n%s", cmd, h.Name, err, out)
	}
}

// processExists reports whether a process with the pid runs (or is not
// yet reaped).
func processExists(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}

package clustertest

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/groundcloud/groundcloud/test/framework/controlplane"
	"github.com/groundcloud/groundcloud/test/framework/netlab"
	"github.com/groundcloud/groundcloud/test/framework/realcluster"
	"github.com/groundcloud/groundcloud/test/framework/redfish"
)

// TestBMC runs the real cluster with a Redfish BMC for each worker node:
// sushy-tools' emulator (HTTPS, basic authentication) on lab host "bmc",
// which the controller manager reaches from its Pod; its credentials in
// Secret groundcloud-bmc-credentials, mounted by the component
// deploy/controller-manager/bmc-credentials. The test bed follows the BMC
// (redfish Follow, realcluster Node.SetPower): a system powered off stops
// its node's kubelet and pulls its cable, powered on it plugs the cable and
// lets the kubelet run again.
//
// The node powered off is the one the controller manager's leader runs
// on, when that is a worker (it dies with it, and the other replica must
// take over and finish the job), otherwise node-2. A StatefulSet with one
// replica runs there. The node is powered off through Redfish: its Node
// turns NotReady, the controller manager taints it
// node.kubernetes.io/out-of-service once the BMC has said Off for the grace
// (bmc-out-of-service = taint), the upstream controllers delete the Pod,
// and the StatefulSet's Pod runs on another node. Powered on: the node is
// Ready again, the taint is gone, and it takes work again.
func TestBMC(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: runs a real cluster")
	}
	if os.Geteuid() != 0 {
		t.Skip("end-to-end test: needs root")
	}
	if err := redfish.Available(); err != nil {
		t.Fatal(err)
	}
	tools, err := controlplane.ToolsDir(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	bmcDir := t.TempDir()
	workers := []string{"node-1", "node-2"}
	c, err := realcluster.Start(t.Context(), realcluster.Options{
		Topology: netlab.Topology{LBHosts: 1, Clients: []string{"client", "bmc"}},
		Dir:      t.TempDir(),
		ToolsDir: tools,
		Logf:     t.Logf,
		// NotReady 16 s after the last heartbeat (upstream's default is
		// 50 s; what this test shows does not depend on it).
		ExtraControllerManagerArgs: []string{"--node-monitor-grace-period=16s"},
		BMCCredentials:             realcluster.BMCCredentials(workers...),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range c.Nodes {
				for _, log := range n.PodLogs() {
					if !strings.Contains(log, "groundcloud-controller-manager") {
						continue
					}
					b, _ := os.ReadFile(log)
					var lines []string
					for _, l := range strings.Split(string(b), "\n") {
						if strings.Contains(l, "onfig") || strings.Contains(l, "BMC") || strings.Contains(l, "out-of-service") || strings.Contains(l, "leader") {
							lines = append(lines, l)
						}
					}
					t.Logf("%s: %s, lines about the cloud-config, BMCs and leadership:\n%s", n.Name, log, strings.Join(lines, "\n"))
				}
			}
			t.Logf("cloud-config:\n%s", c.CloudConfig)
			t.Logf("the BMC's log:\n%s", controlplane.LogTail(filepath.Join(bmcDir, "emulator.log"), 20))
		}
	})
	ctx := t.Context()
	bmc, err := c.StartBMC(ctx, c.Clients["bmc"], bmcDir, workers...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bmc.Close() })
	if err := c.SetCloudConfig(ctx, bmc.CloudConfig(c.CloudConfig, "bmc-out-of-service-grace = 5s", "bmc-out-of-service = taint")); err != nil {
		t.Fatal(err)
	}
	for _, w := range workers {
		waitNodeCond(t, c, w, "BMCReachable True", func(n *corev1.Node) bool {
			cond := nodeCond(n, "BMCReachable")
			return cond != nil && cond.Status == corev1.ConditionTrue && strings.Contains(cond.Message, "PowerState On")
		})
	}
	if err := c.SpreadControllerManager(ctx); err != nil {
		t.Fatal(err)
	}
	leader, err := c.ControllerManagerLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	victim := "node-2"
	if slices.Contains(workers, leader.Spec.NodeName) {
		victim = leader.Spec.NodeName
		t.Logf("powering off %s, where the controller manager's leader %s runs", victim, leader.Name)
	} else {
		t.Logf("powering off %s; the controller manager's leader %s runs on %s", victim, leader.Name, leader.Spec.NodeName)
	}
	emu, system, power := bmc.Emulator, bmc.System(victim), bmc.Power(victim)

	// The StatefulSet, its one Pod on the victim.
	ss := c.EchoStatefulSet(echoNS, "db", victim)
	if _, err := c.Client.AppsV1().StatefulSets(echoNS).Create(ctx, ss, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.AppsV1().StatefulSets(echoNS).Delete(context.Background(), "db", metav1.DeleteOptions{})
	})
	if n, err := c.WaitPodRunning(ctx, echoNS, "db-0", ""); err != nil || n != victim {
		t.Fatalf("db-0 runs on %q (%v), want %s", n, err, victim)
	}

	// Off.
	if err := emu.Reset(ctx, system, "ForceOff"); err != nil {
		t.Fatal(err)
	}
	off, err := power.WaitApplied(ctx, "Off")
	if err != nil {
		t.Fatal(err)
	}
	waitNodeCond(t, c, victim, "NotReady", func(n *corev1.Node) bool {
		cond := nodeCond(n, corev1.NodeReady)
		return cond != nil && cond.Status != corev1.ConditionTrue
	})
	waitNodeCond(t, c, victim, "tainted out of service", func(n *corev1.Node) bool { return hasNodeTaint(n, corev1.TaintNodeOutOfService) })
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := c.WaitPodRunning(ctx, echoNS, "db-0", "")
		return err == nil && n != victim, nil
	})
	if err != nil {
		t.Fatalf("db-0 not running on another node after %s was powered off: %v", victim, err)
	}
	t.Logf("db-0 Running on another node %s after %s was powered off", time.Since(off).Round(time.Second), victim)

	// On.
	if err := emu.Reset(ctx, system, "On"); err != nil {
		t.Fatal(err)
	}
	if _, err := power.WaitApplied(ctx, "On"); err != nil {
		t.Fatal(err)
	}
	waitNodeCond(t, c, victim, "Ready and no longer out of service", func(n *corev1.Node) bool {
		cond := nodeCond(n, corev1.NodeReady)
		return cond != nil && cond.Status == corev1.ConditionTrue && !hasNodeTaint(n, corev1.TaintNodeOutOfService)
	})
	// The victim takes work again: a Pod that may only run there.
	d := c.EchoDeployment(echoNS, "after", 1)
	d.Spec.Template.Spec.NodeSelector = map[string]string{corev1.LabelHostname: victim}
	if _, err := c.Client.AppsV1().Deployments(echoNS).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitDeploymentReady(ctx, echoNS, "after"); err != nil {
		t.Fatalf("a Pod on %s after it came back: %v", victim, err)
	}
	for _, e := range []string{"OutOfServiceTaintApplied", "OutOfServiceTaintRemoved"} {
		eventually(t, "a "+e+" Event on "+victim, func(ctx context.Context) bool {
			evs, err := c.Client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + victim + ",reason=" + e})
			return err == nil && len(evs.Items) > 0
		})
	}
}

// waitNodeCond waits until the Node satisfies cond.
func waitNodeCond(t *testing.T, c *realcluster.Cluster, name, what string, cond func(*corev1.Node) bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		return err == nil && cond(n), nil
	})
	if err != nil {
		n, _ := c.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		t.Fatalf("%s: not %s: %v; conditions %+v, taints %+v", name, what, err, n.Status.Conditions, n.Spec.Taints)
	}
}

func nodeCond(n *corev1.Node, typ corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == typ {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func hasNodeTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

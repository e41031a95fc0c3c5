package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/groundcloud/groundcloud/internal/outofservice"
	"github.com/groundcloud/groundcloud/test/framework/netlab"
	"github.com/groundcloud/groundcloud/test/framework/redfish"
)

const (
	bmcSystem1 = "0b1f5a2e-35c4-4d0e-8a59-0000000000a1"
	bmcSystem2 = "0b1f5a2e-35c4-4d0e-8a59-0000000000a2"
	bmcSystem4 = "0b1f5a2e-35c4-4d0e-8a59-0000000000a4"
)

// TestBMCs runs the controller manager against a real Redfish BMC
// (sushy-tools' emulator, HTTPS with basic authentication, in a lab host;
// the controller manager reaches it through a relay on loopback) for three
// machines: node-1 with the right credentials (bmc-out-of-service =
// taint), node-2 with a wrong password, node-3 verifying the BMC's
// certificate, which names another address. node-1's Node says
// BMCReachable True; node-2's and node-3's False (Unauthorized, TLS) with a
// Warning Event each, and neither is tainted or deleted. bmc-metadata:
// node-1's model, serial number and BIOS version are written on its Node,
// its instance type from the model; node-4's instance-type from the
// cloud-config stays. node-1 powered
// off through Redfish while its Node is NotReady: out-of-service taint;
// powered on and Ready: the taint goes. node-4 with fencing (bmc-fence =
// power-off, bmc-fence-after 3s): left On while its Node is Ready; once
// NotReady for 3 s while its BMC says On, the controller manager powers it
// off through Redfish (Fencing and Fenced Events), and the Node is tainted
// once the BMC says Off for the grace. node-5, whose BMC answers after
// bmc-timeout (a relay that holds each answer 5 s): BMCReachable False
// (Timeout) and a Warning, never fenced or tainted while NotReady. The BMC
// stopped: node-1's condition turns False (Unreachable), and nothing else
// changes.
func TestBMCs(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: runs etcd, kube-apiserver, our binaries and network namespaces")
	}
	if err := redfish.Available(); err != nil {
		t.Fatal(err)
	}
	l := netlab.NewT(t, netlab.Options{})
	bmcHost := l.AddHostT(t, "bmc", netlab.HostOptions{})
	emu, err := redfish.Start(t.Context(), bmcHost, t.TempDir(), redfish.Options{
		Systems: []redfish.System{
			{ID: bmcSystem1, Name: "node-1", On: true, Model: "PowerEdge R640", SerialNumber: "CN7016", BIOSVersion: "2.19.1"},
			{ID: bmcSystem2, Name: "node-2", On: true},
			{ID: bmcSystem4, Name: "node-4", On: true, Model: "ProLiant DL360 Gen10", SerialNumber: "MXQ91"},
		},
		Username: "admin", Password: "s3cret", TLS: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emu.Stop() })
	relay, err := bmcHost.ForwardInto(t.Context(), emu.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = relay.Close() })
	url := "https://" + relay.Addr()
	// node-5's BMC is the same emulator behind a relay of its own that
	// holds every answer for 5 s: longer than bmc-timeout.
	slow, err := bmcHost.ForwardInto(t.Context(), emu.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = slow.Close() })
	slow.SetDelay(5 * time.Second)

	dir := t.TempDir()
	user, pass, wrong := filepath.Join(dir, "user"), filepath.Join(dir, "pass"), filepath.Join(dir, "wrong")
	writeFile(t, user, "admin\n")
	writeFile(t, pass, "s3cret\n")
	writeFile(t, wrong, "guess\n")
	machineAt := func(url, name, system, extra string) string {
		return fmt.Sprintf("[Machine %q]\nzone = rack-1\nbmc-url = %s\nbmc-system = %s\nbmc-username-file = %s\nbmc-timeout = 2s\nbmc-poll-interval = 2s\n%s\n",
			name, url, system, user, extra)
	}
	machine := func(name, system, extra string) string { return machineAt(url, name, system, extra) }
	cfg := "[Global]\nregion = home\nbmc-out-of-service-grace = 2s\nbmc-fence-after = 3s\nbmc-metadata = true\n\n" +
		machine("node-1", bmcSystem1, "bmc-password-file = "+pass+"\nbmc-insecure-skip-verify = true\nbmc-out-of-service = taint") +
		machine("node-2", bmcSystem2, "bmc-password-file = "+wrong+"\nbmc-insecure-skip-verify = true\nbmc-out-of-service = taint") +
		// The certificate names the BMC host's address, not the relay's.
		machine("node-3", bmcSystem2, "bmc-password-file = "+pass+"\nbmc-ca-file = "+emu.CAFile+"\nbmc-out-of-service = taint") +
		machine("node-4", bmcSystem4, "bmc-password-file = "+pass+"\nbmc-insecure-skip-verify = true\nbmc-out-of-service = taint\nbmc-fence = power-off\ninstance-type = large") +
		machineAt("https://"+slow.Addr(), "node-5", bmcSystem2, "bmc-password-file = "+pass+"\nbmc-insecure-skip-verify = true\nbmc-out-of-service = taint\nbmc-fence = power-off")
	cl := startCluster(t, cfg)
	for _, n := range []string{"node-1", "node-2", "node-3", "node-4", "node-5"} {
		createKubeletNode(t, cl.client, n, v1.ConditionTrue)
	}

	bmcCond := func(name string, status v1.ConditionStatus, reason string) *v1.Node {
		t.Helper()
		return waitNode(t, cl.client, name, "BMCReachable "+string(status)+" "+reason, func(n *v1.Node) bool {
			c := nodeCondition(n, outofservice.ConditionBMC)
			return c != nil && c.Status == status && c.Reason == reason
		})
	}
	if c := nodeCondition(bmcCond("node-1", v1.ConditionTrue, outofservice.ReasonAnswered), outofservice.ConditionBMC); !strings.Contains(c.Message, "PowerState On") {
		t.Errorf("node-1's condition: %q", c.Message)
	}
	if c := nodeCondition(bmcCond("node-2", v1.ConditionFalse, "Unauthorized"), outofservice.ConditionBMC); !strings.Contains(c.Message, "does not answer") {
		t.Errorf("node-2's condition: %q", c.Message)
	}
	// bmc-metadata: node-1's BMC gives its model, serial number and BIOS
	// version: annotations, and the instance type from the model; node-4
	// has instance-type in the cloud-config, which stays; node-2's BMC
	// refuses the credentials: nothing.
	waitNode(t, cl.client, "node-1", "the BMC's metadata", func(n *v1.Node) bool {
		return n.Annotations[outofservice.AnnotationModel] == "PowerEdge R640" && n.Annotations[outofservice.AnnotationSerialNumber] == "CN7016" &&
			n.Annotations[outofservice.AnnotationBIOSVersion] == "2.19.1" && n.Labels[v1.LabelInstanceTypeStable] == "PowerEdge-R640"
	})
	eventually(t, "an InstanceTypeFromBMC Event on node-1", func() bool { return nodeEvent(t, cl.client, "node-1", "InstanceTypeFromBMC") })
	n4 := waitNode(t, cl.client, "node-4", "the BMC's metadata", func(n *v1.Node) bool {
		return n.Annotations[outofservice.AnnotationModel] == "ProLiant DL360 Gen10" && n.Annotations[outofservice.AnnotationSerialNumber] == "MXQ91"
	})
	if got := n4.Labels[v1.LabelInstanceTypeStable]; got != "large" {
		t.Errorf("node-4's instance type %q, want the cloud-config's large", got)
	}
	if _, ok := n4.Annotations[outofservice.AnnotationBIOSVersion]; ok {
		t.Errorf("node-4 has a BIOS version its BMC does not give: %v", n4.Annotations)
	}
	if n2, err := cl.client.CoreV1().Nodes().Get(t.Context(), "node-2", metav1.GetOptions{}); err != nil {
		t.Error(err)
	} else if _, ok := n2.Annotations[outofservice.AnnotationModel]; ok {
		t.Errorf("node-2, whose BMC refuses us, has a model: %v", n2.Annotations)
	}
	bmcCond("node-3", v1.ConditionFalse, "TLS")
	bmcCond("node-5", v1.ConditionFalse, "Timeout")
	for _, n := range []string{"node-2", "node-3", "node-5"} {
		eventually(t, "a BMCUnreachable Event on "+n, func() bool { return nodeEvent(t, cl.client, n, "BMCUnreachable") })
	}

	// node-1 goes down: its kubelet stops reporting, its BMC says Off.
	setReady(t, cl.client, "node-1", v1.ConditionUnknown)
	if err := emu.Reset(t.Context(), bmcSystem1, "ForceOff"); err != nil {
		t.Fatal(err)
	}
	waitNode(t, cl.client, "node-1", "tainted out of service", func(n *v1.Node) bool { return hasTaint(n, v1.TaintNodeOutOfService) })
	eventually(t, "an OutOfServiceTaintApplied Event", func() bool { return nodeEvent(t, cl.client, "node-1", "OutOfServiceTaintApplied") })

	// Back: On, then Ready.
	if err := emu.Reset(t.Context(), bmcSystem1, "On"); err != nil {
		t.Fatal(err)
	}
	if err := emu.WaitPowerState(t.Context(), bmcSystem1, "On"); err != nil {
		t.Fatal(err)
	}
	setReady(t, cl.client, "node-1", v1.ConditionTrue)
	waitNode(t, cl.client, "node-1", "no longer tainted", func(n *v1.Node) bool { return !hasTaint(n, v1.TaintNodeOutOfService) })

	// Fencing: node-4 stays On while its Node is Ready, past
	// bmc-fence-after (the controller syncs every 2 s)...
	bmcCond("node-4", v1.ConditionTrue, outofservice.ReasonAnswered)
	time.Sleep(3*time.Second + 2*outofservice.SyncInterval)
	if st, err := emu.PowerState(t.Context(), bmcSystem4); err != nil || st != "On" {
		t.Fatalf("node-4, Ready, has PowerState %q (%v): powered off while Ready", st, err)
	}
	if nodeEvent(t, cl.client, "node-4", "Fencing") {
		t.Fatal("a Fencing Event for node-4 while its Node is Ready")
	}
	// ...and is powered off once its Node has been NotReady for 3 s,
	// then tainted once the BMC has said Off for the grace.
	setReady(t, cl.client, "node-4", v1.ConditionUnknown)
	fenceCtx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := emu.WaitPowerState(fenceCtx, bmcSystem4, "Off"); err != nil {
		t.Fatalf("node-4 not powered off within a minute of being NotReady: %v", err)
	}
	waitNode(t, cl.client, "node-4", "tainted out of service after fencing", func(n *v1.Node) bool { return hasTaint(n, v1.TaintNodeOutOfService) })
	for _, reason := range []string{"Fencing", "Fenced", "OutOfServiceTaintApplied"} {
		eventually(t, "a "+reason+" Event on node-4", func() bool { return nodeEvent(t, cl.client, "node-4", reason) })
	}
	// node-1 (no fencing) NotReady with its BMC On is never powered
	// off; nor node-5, with fencing, whose BMC answers too slowly: no
	// fresh answer, no action.
	setReady(t, cl.client, "node-1", v1.ConditionUnknown)
	setReady(t, cl.client, "node-5", v1.ConditionUnknown)
	time.Sleep(3*time.Second + 2*outofservice.SyncInterval)
	for _, m := range []struct{ node, system string }{{"node-1", bmcSystem1}, {"node-5", bmcSystem2}} {
		if st, err := emu.PowerState(t.Context(), m.system); err != nil || st != "On" {
			t.Errorf("%s has PowerState %q (%v): powered off", m.node, st, err)
		}
	}
	if nodeEvent(t, cl.client, "node-5", "Fencing") {
		t.Error("a Fencing Event for node-5, whose BMC does not answer in time")
	}
	bmcCond("node-5", v1.ConditionFalse, "Timeout")

	// The BMC stops answering: a condition, nothing else.
	if err := emu.Stop(); err != nil {
		t.Fatal(err)
	}
	bmcCond("node-1", v1.ConditionFalse, "Unreachable")
	setReady(t, cl.client, "node-1", v1.ConditionUnknown)
	for _, n := range []string{"node-1", "node-2", "node-3", "node-5"} {
		node, err := cl.client.CoreV1().Nodes().Get(t.Context(), n, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: %v (deleted?)", n, err)
		}
		if hasTaint(node, v1.TaintNodeOutOfService) {
			t.Errorf("%s tainted out of service without a BMC's Off", n)
		}
	}
}

func nodeCondition(n *v1.Node, typ v1.NodeConditionType) *v1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == typ {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// setReady sets the Node's Ready condition, leaving the others.
func setReady(t *testing.T, c kubernetes.Interface, name string, ready v1.ConditionStatus) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		cond := v1.NodeCondition{Type: v1.NodeReady, Status: ready, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now}
		if c := nodeCondition(n, v1.NodeReady); c != nil {
			*c = cond
		} else {
			n.Status.Conditions = append(n.Status.Conditions, cond)
		}
		_, err = c.CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// nodeEvent reports whether an Event with reason is about Node name.
func nodeEvent(t *testing.T, c kubernetes.Interface, name, reason string) bool {
	t.Helper()
	evs, err := c.CoreV1().Events("").List(t.Context(), metav1.ListOptions{FieldSelector: "reason=" + reason + ",involvedObject.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	return len(evs.Items) > 0
}

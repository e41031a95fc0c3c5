package outofservice

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clienttesting "k8s.io/client-go/testing"

	"github.com/groundcloud/groundcloud/internal/bmc"
	"github.com/groundcloud/groundcloud/internal/config"
)

func pod(name, node string, terminating bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: name, UID: "uid-" + "name"},
		Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if terminating {
		p.DeletionTimestamp = &metav1.Time{Time: now.Add(-time.Second)}
	}
	return p
}

func marked(n *corev1.Node, at time.Time) *corev1.Node {
	n.Annotations = map[string]string{MarkAnnotation: at.UTC().Format(time.RFC3339)}
	return n
}

// TestReap: the terminating Pods of a NotReady Node with our taint, marked
// within ReapWindow, are marked Failed and deleted with no grace, with an
// Event; a Pod that tolerates the taint (not terminating), the Pods of
// other Nodes, of a Ready Node, of one tainted long ago and of one tainted
// by a person are left alone.
func TestReap(t *testing.T) {
	RegisterMetrics()
	b := config.BMC{URL: "https://bmc", InsecureSkipVerify: true, Timeout: time.Second, PollInterval: 10 * time.Second}
	machines := map[string]*config.Machine{}
	for _, m := range []string{"a", "old", "ready", "human"} {
		machines[m] = &config.Machine{Name: m, BMC: &b}
	}
	cfg := &config.Config{Global: config.Global{BMCOutOfService: config.OutOfServiceTaint, BMCOutOfServiceGrace: 30 * time.Second}, Machines: machines}
	off := bmc.Status{BMC: b, Answer: bmc.Answer{PowerState: bmc.PowerOff}, AnsweredAt: now, OffSince: now.Add(-time.Minute), MaxAge: 30 * time.Second}
	power := statuses{"a": off, "old": off, "ready": off, "human": off}
	human := corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "by-hand", Effect: corev1.TaintEffectNoExecute}
	c, client, events, ctx := newTestController(t, cfg, power,
		marked(node("a", corev1.ConditionUnknown, Taint), now.Add(-10*time.Second)),
		marked(node("old", corev1.ConditionUnknown, Taint), now.Add(-2*ReapWindow)),
		marked(node("ready", corev1.ConditionTrue, Taint), now.Add(-10*time.Second)),
		node("human", corev1.ConditionFalse, human))
	for _, p := range []*corev1.Pod{pod("db-0", "a", true), pod("tolerates", "a", false), pod("db-1", "old", true),
		pod("db-2", "ready", true), pod("db-3", "human", true)} {
		if _, err := client.CoreV1().Pods("db").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	client.ClearActions()

	c.SyncAll(ctx)
	var did []string
	for _, a := range client.Actions() {
		if a.GetResource().Resource != "pods" || a.GetVerb() == "list" {
			continue
		}
		switch a := a.(type) {
		case clienttesting.PatchAction:
			if a.GetSubresource() != "status" || !strings.Contains(string(a.GetPatch()), `"phase":"Failed"`) {
				t.Errorf("patch %s of %s: %s", a.GetSubresource(), a.GetName(), a.GetPatch())
			}
			did = append(did, "fail "+a.GetName())
		case clienttesting.DeleteAction:
			if g := a.GetDeleteOptions().GracePeriodSeconds; g == nil || *g != 0 {
				t.Errorf("delete %s with grace %v, want 0", a.GetName(), g)
			}
			did = append(did, "delete "+a.GetName())
		default:
			did = append(did, a.GetVerb()+" "+a.GetResource().Resource)
		}
	}
	if want := []string{"fail db-0", "delete db-0"}; !slices.Equal(did, want) {
		t.Errorf("did %q, want %q", did, want)
	}
	select {
	case e := <-events.Events:
		if !strings.Contains(e, "TerminatingPodsDeleted") || !strings.Contains(e, "db/db-0") {
			t.Errorf("event %q", e)
		}
	default:
		t.Error("no Event for the deleted Pod")
	}
	if _, err := client.CoreV1().Pods("db").Get(ctx, "tolerates", metav1.GetOptions{}); err != nil {
		t.Errorf("the Pod that tolerates the taint: %v", err)
	}
}

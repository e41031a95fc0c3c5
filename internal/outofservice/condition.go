package outofservice

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/groundcloud/groundcloud/internal/bmc"
	"github.com/groundcloud/groundcloud/internal/config"
	"github.com/groundcloud/groundcloud/internal/inventory"
)

// ConditionBMC is the Node condition that says whether the machine's BMC
// answers: True (reason Answered, the message with its PowerState), or
// False with the reason a poll failed (bmc.Reason: Timeout, Unreachable,
// TLS, Unauthorized, Files, NoSystem, Protocol). Written for every Node
// whose machine has a BMC, whatever bmc-out-of-service says, once the BMC
// was polled with the settings in force; it changes nothing else.
const ConditionBMC = "BMCReachable"

// ReasonAnswered is ConditionBMC's reason while the BMC answers.
const ReasonAnswered = "Answered"

// bmcCondition is the condition s calls for.
func bmcCondition(b config.BMC, s bmc.Status) corev1.NodeCondition {
	if s.Err != nil {
		return corev1.NodeCondition{Type: ConditionBMC, Status: corev1.ConditionFalse, Reason: conditionReason(s.Reason),
			Message: fmt.Sprintf("the BMC at %s does not answer (%s): %v; the machine's power state is unknown, nothing is done on it", b.URL, s.Reason, s.Err)}
	}
	return corev1.NodeCondition{Type: ConditionBMC, Status: corev1.ConditionTrue, Reason: ReasonAnswered,
		Message: fmt.Sprintf("the BMC at %s answers: PowerState %s", b.URL, s.Answer.PowerState)}
}

// conditionReason turns a bmc.Reason ("no-system") into a condition
// reason ("NoSystem").
func conditionReason(r string) string {
	switch r {
	case bmc.ReasonTimeout:
		return "Timeout"
	case bmc.ReasonUnreachable:
		return "Unreachable"
	case bmc.ReasonTLS:
		return "TLS"
	case bmc.ReasonUnauthorized:
		return "Unauthorized"
	case bmc.ReasonFiles:
		return "Files"
	case bmc.ReasonNoSystem:
		return "NoSystem"
	}
	return "Protocol"
}

// reportBMC writes n's ConditionBMC when its status or reason changes (or
// its power state, in the message), with a Warning Event when the BMC
// stops answering and a Normal one when it answers again.
func (c *Controller) reportBMC(ctx context.Context, cfg *config.Config, n *corev1.Node) {
	m := inventory.Lookup(cfg, n).Machine
	if m == nil || m.BMC == nil {
		return
	}
	s, ok := c.power.Status(m.Name)
	if !ok || s.PolledAt.IsZero() || s.BMC != *m.BMC {
		return // not polled yet with the settings in force
	}
	want := bmcCondition(*m.BMC, s)
	var old *corev1.NodeCondition
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == ConditionBMC {
			old = &n.Status.Conditions[i]
		}
	}
	if old != nil && old.Status == want.Status && old.Reason == want.Reason && (want.Status == corev1.ConditionFalse || old.Message == want.Message) {
		return
	}
	now := metav1.NewTime(c.now())
	want.LastHeartbeatTime, want.LastTransitionTime = now, now
	if old != nil && old.Status == want.Status {
		want.LastTransitionTime = old.LastTransitionTime
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{want}}})
	if err == nil {
		_, err = c.client.CoreV1().Nodes().Patch(ctx, n.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	}
	logger := klog.FromContext(ctx).WithValues("node", klog.KObj(n), "machine", m.Name, "bmc", m.BMC.URL)
	if err != nil {
		logger.Error(err, "Cannot write the Node's BMC condition", "status", want.Status, "reason", want.Reason)
		return
	}
	switch {
	case want.Status == corev1.ConditionFalse && (old == nil || old.Status != corev1.ConditionFalse || old.Reason != want.Reason):
		c.events.Eventf(n, corev1.EventTypeWarning, "BMCUnreachable", "%s", want.Message)
	case want.Status == corev1.ConditionTrue && old != nil && old.Status == corev1.ConditionFalse:
		c.events.Eventf(n, corev1.EventTypeNormal, "BMCReachable", "%s", want.Message)
	}
}

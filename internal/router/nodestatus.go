package router

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/groundcloud/groundcloud/internal/backends"
)

// The reasons of the Node condition backends.ConditionPodRoutes.
const (
	// ReasonRoutesProgrammed: every route to the other Nodes' pods is in
	// the kernel.
	ReasonRoutesProgrammed = "RoutesProgrammed"
	// ReasonRoutesMissing: some are not (the message says which and why).
	ReasonRoutesMissing = "RoutesMissing"
)

// podRoutes is the condition a router on a node writes on its Node: True
// when every route it should hold (wants) is programmed, that is, none
// failed; the message names up to three that did. Routes it will not
// program because their spec is wrong (Select's problems) do not count:
// they are the controller manager's to mend and their own status says so.
func podRoutes(wants []Want, failed map[netip.Prefix]error) corev1.NodeCondition {
	var bad []string
	for _, w := range wants {
		if err := failed[w.Dst]; err != nil {
			bad = append(bad, fmt.Sprintf("%s via %s: %v", w.Dst, w.Via, err))
		}
	}
	if len(bad) == 0 {
		return corev1.NodeCondition{Type: backends.ConditionPodRoutes, Status: corev1.ConditionTrue, Reason: ReasonRoutesProgrammed,
			Message: fmt.Sprintf("%d routes to other nodes' pods programmed by groundcloud-router", len(wants))}
	}
	msg := fmt.Sprintf("%d of %d routes to other nodes' pods not programmed: %s", len(bad), len(wants), strings.Join(bad[:min(3, len(bad))], "; "))
	if len(bad) > 3 {
		msg += "; ..."
	}
	return corev1.NodeCondition{Type: backends.ConditionPodRoutes, Status: corev1.ConditionFalse, Reason: ReasonRoutesMissing, Message: msg}
}

// sameCondition reports whether a and b say the same (times aside).
func sameCondition(a, b *corev1.NodeCondition) bool {
	return a != nil && b != nil && a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message
}

var nodesResource = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}

// reportNode writes c on this host's Node when it differs from what this
// process wrote last (always on its first sync, which replaces what a
// previous run left). The transition time moves when the status does.
func (r *Router) reportNode(ctx context.Context, c corev1.NodeCondition) error {
	if sameCondition(r.nodeCond, &c) {
		return nil
	}
	now := metav1.Now()
	c.LastHeartbeatTime, c.LastTransitionTime = now, now
	if r.nodeCond != nil && r.nodeCond.Status == c.Status {
		c.LastTransitionTime = r.nodeCond.LastTransitionTime
	}
	// A strategic merge patch merges conditions by type: the kubelet's and
	// others' stay as they are.
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{c}}})
	if err != nil {
		return err
	}
	if _, err := r.cfg.Dynamic.Resource(nodesResource).Patch(ctx, r.cfg.NodeName, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager(r.cfg.Host)}, "status"); err != nil {
		return fmt.Errorf("write condition %s on Node %s: %w", c.Type, r.cfg.NodeName, err)
	}
	r.nodeCond = &c
	return nil
}

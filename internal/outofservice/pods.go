package outofservice

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// ReapWindow is how long after applying the taint the controller
// force-deletes the terminating Pods of the Node itself. Kubernetes' pod
// garbage collector does the same (pkg/controller/podgc gcTerminating:
// terminating Pods of a NotReady Node with the out-of-service taint are
// marked Failed and deleted with no grace), but only every 20 s; doing it
// at once saves a StatefulSet's replacement Pod up to those 20 s. After
// the window the collector has run and the Node's Pods are no longer
// listed.
const ReapWindow = time.Minute

// reapable reports whether the terminating Pods of n are to be
// force-deleted now: n carries the taint this controller applied (marked
// less than ReapWindow ago), and its Ready condition is not True — the
// pod garbage collector's rule, on Nodes of ours only.
func reapable(n *corev1.Node, now time.Time) bool {
	var tainted bool
	for _, t := range n.Spec.Taints {
		tainted = tainted || isOutOfService(t)
	}
	at, err := time.Parse(time.RFC3339, n.Annotations[MarkAnnotation])
	if !tainted || err != nil || now.Sub(at) > ReapWindow {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status != corev1.ConditionTrue
		}
	}
	return true
}

// reap force-deletes the terminating Pods of n (reapable): each is marked
// Failed, as its kubelet never will, then deleted with no grace, with its
// UID as precondition. Pods that tolerate the taint are not terminating
// (the taint-eviction controller leaves them) and are not touched. One
// Event on the Node names the Pods deleted.
func (c *Controller) reap(ctx context.Context, n *corev1.Node) {
	pods, err := c.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", n.Name).String()})
	logger := klog.FromContext(ctx).WithValues("node", klog.KObj(n))
	if err != nil {
		logger.Error(err, "Cannot list the Pods of an out-of-service Node")
		return
	}
	var deleted []string
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp == nil || p.Spec.NodeName != n.Name {
			continue
		}
		if err := c.forceDelete(ctx, p); err != nil {
			actions.WithLabelValues("force-delete", "error").Inc()
			logger.Error(err, "Cannot force-delete a terminating Pod of an out-of-service Node", "pod", klog.KObj(p))
			continue
		}
		actions.WithLabelValues("force-delete", "success").Inc()
		logger.Info("Force-deleted a terminating Pod of an out-of-service Node", "pod", klog.KObj(p))
		deleted = append(deleted, p.Namespace+"/"+p.Name)
	}
	if len(deleted) > 0 {
		c.events.Eventf(n, corev1.EventTypeNormal, "TerminatingPodsDeleted",
			"Force-deleted %d terminating Pods of the out-of-service Node (marked Failed, no grace), as the pod garbage collector would: %s",
			len(deleted), strings.Join(deleted, ", "))
	}
}

// forceDelete marks p Failed unless it has ended, then deletes it with no
// grace; a Pod already gone is no error.
func (c *Controller) forceDelete(ctx context.Context, p *corev1.Pod) error {
	pods := c.client.CoreV1().Pods(p.Namespace)
	if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"uid": p.UID},
			"status":   map[string]any{"phase": corev1.PodFailed},
		})
		if err != nil {
			return err
		}
		if _, err := pods.Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("mark Failed: %w", err)
		}
	}
	err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64), Preconditions: metav1.NewUIDPreconditions(string(p.UID))})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete: %w", err)
	}
	return nil
}

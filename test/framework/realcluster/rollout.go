package realcluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// RollOut changes the Pod template of the kube-system workload name (kind
// "DaemonSet" or "Deployment") with mutate, as an upgrade or `kubectl
// rollout restart` does, and returns once every Pod runs the new template
// and no other is left. The controllers write the objects too: it reads
// again on a conflict.
func (c *Cluster) RollOut(ctx context.Context, kind, name string, mutate func(*metav1.ObjectMeta, *corev1.PodTemplateSpec)) error {
	var rolledOut func(context.Context, string, string) (string, error)
	var err error
	switch kind {
	case "DaemonSet":
		dsets := c.Client.AppsV1().DaemonSets(metav1.NamespaceSystem)
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			ds, err := dsets.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			mutate(&ds.ObjectMeta, &ds.Spec.Template)
			_, err = dsets.Update(ctx, ds, metav1.UpdateOptions{})
			return err
		})
		rolledOut = c.daemonSetRolledOut
	case "Deployment":
		deps := c.Client.AppsV1().Deployments(metav1.NamespaceSystem)
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			d, err := deps.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			mutate(&d.ObjectMeta, &d.Spec.Template)
			_, err = deps.Update(ctx, d, metav1.UpdateOptions{})
			return err
		})
		rolledOut = c.deploymentRolledOut
	default:
		return fmt.Errorf("roll out %s %s: kind must be DaemonSet or Deployment", kind, name)
	}
	if err != nil {
		return fmt.Errorf("roll out %s %s: %w", kind, name, err)
	}
	return c.poll(ctx, fmt.Sprintf("rollout of %s %s", kind, name), func(ctx context.Context) (string, error) {
		return rolledOut(ctx, metav1.NamespaceSystem, name)
	})
}

// RolloutRestart rolls the kube-system workload out again unchanged, as
// `kubectl rollout restart` does (a new restartedAt annotation on its Pod
// template), and returns once it has.
func (c *Cluster) RolloutRestart(ctx context.Context, kind, name string) error {
	return c.RollOut(ctx, kind, name, func(_ *metav1.ObjectMeta, tpl *corev1.PodTemplateSpec) {
		if tpl.Annotations == nil {
			tpl.Annotations = map[string]string{}
		}
		tpl.Annotations["kubectl.kubernetes.io/restartedAt"] = time.Now().Format(time.RFC3339Nano)
	})
}

package agent

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/groundcloud/groundcloud/internal/kubecore"
)

// daemonSets are read with the dynamic client: the agent links core/v1
// only (internal/kubecore).
var daemonSets = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}

// DaemonSetStop tells whether an agent run by a DaemonSet stops for good
// (Config.ForGood): its DaemonSet is gone or being deleted, or the agent
// may no longer read it (an uninstall: `kubectl delete -k` and `helm
// uninstall` may delete the agent's RBAC or ServiceAccount before its Pods
// stop), or the DaemonSet no longer selects this host's Node by its
// nodeSelector, or the Node is gone (the host left the load-balancer
// hosts). Anything else - a rolling update, a helm upgrade, a deleted Pod
// - is a restart.
// When the apiserver does not answer in time the stop counts as a
// restart: the data plane goes on, and the next agent (or an uninstall
// that reaches the apiserver) decides.
type DaemonSetStop struct {
	Dynamic   dynamic.Interface
	Nodes     kubecore.Nodes
	Namespace string
	Name      string
	Node      string
}

// ForGood implements Config.ForGood.
func (d DaemonSetStop) ForGood(ctx context.Context) (bool, string) {
	ds, dsErr := d.Dynamic.Resource(daemonSets).Namespace(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
	var node *corev1.Node
	var nodeErr error
	if dsErr == nil {
		node, nodeErr = d.Nodes.Get(ctx, d.Node, metav1.GetOptions{})
	}
	return stopVerdict(d.Namespace+"/"+d.Name, d.Node, ds, dsErr, node, nodeErr)
}

// stopVerdict is pure: what the DaemonSet and the Node read say.
func stopVerdict(dsName, nodeName string, ds *unstructured.Unstructured, dsErr error, node *corev1.Node, nodeErr error) (bool, string) {
	switch {
	case apierrors.IsNotFound(dsErr):
		return true, "DaemonSet " + dsName + " is gone"
	case apierrors.IsForbidden(dsErr) || apierrors.IsUnauthorized(dsErr):
		return true, fmt.Sprintf("no longer allowed to read DaemonSet %s (its RBAC or ServiceAccount is gone): %v", dsName, dsErr)
	case dsErr != nil:
		return false, fmt.Sprintf("cannot read DaemonSet %s, taken for a restart: %v", dsName, dsErr)
	case ds.GetDeletionTimestamp() != nil:
		return true, "DaemonSet " + dsName + " is being deleted"
	case apierrors.IsNotFound(nodeErr):
		return true, "Node " + nodeName + " is gone"
	case nodeErr != nil:
		return false, fmt.Sprintf("cannot read Node %s, taken for a restart: %v", nodeName, nodeErr)
	}
	sel, err := nodeSelectorOf(ds)
	if err != nil {
		return false, fmt.Sprintf("cannot read the nodeSelector of DaemonSet %s, taken for a restart: %v", dsName, err)
	}
	if !sel.Matches(labels.Set(node.Labels)) {
		return true, "DaemonSet " + dsName + " no longer selects Node " + nodeName
	}
	return false, "DaemonSet " + dsName + " still runs on Node " + nodeName + ": a restart"
}

// parseDaemonSet reads --daemonset, namespace/name ("" is no DaemonSet).
func parseDaemonSet(s string) (namespace, name string, err error) {
	if s == "" {
		return "", "", nil
	}
	ns, n, ok := strings.Cut(s, "/")
	if !ok || ns == "" || n == "" || strings.Contains(n, "/") {
		return "", "", fmt.Errorf("--daemonset %q: want namespace/name", s)
	}
	return ns, n, nil
}

// HostSelector reads the DaemonSet's nodeSelector: the Nodes that are
// load-balancer hosts (Config.LBHosts).
func (d DaemonSetStop) HostSelector(ctx context.Context) (labels.Selector, error) {
	ds, err := d.Dynamic.Resource(daemonSets).Namespace(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("read DaemonSet %s/%s: %w", d.Namespace, d.Name, err)
	}
	sel, err := nodeSelectorOf(ds)
	if err != nil {
		return nil, fmt.Errorf("the nodeSelector of DaemonSet %s/%s: %w", d.Namespace, d.Name, err)
	}
	return sel, nil
}

// nodeSelectorOf is the selector of a DaemonSet's nodeSelector.
func nodeSelectorOf(ds *unstructured.Unstructured) (labels.Selector, error) {
	sel, _, err := unstructured.NestedStringMap(ds.Object, "spec", "template", "spec", "nodeSelector")
	if err != nil {
		return nil, err
	}
	return labels.SelectorFromSet(sel), nil
}

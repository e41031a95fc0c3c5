package agent

import (
	"context"
	"maps"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// HostLabels are the labels the pools' and peers' host selectors are
// matched against: the host's own Node's, or fixed ones (--host-labels) on
// a host that is not a Node.
type HostLabels interface {
	Labels() labels.Set
}

// FixedLabels are the labels of a host that is not a Node.
type FixedLabels labels.Set

// Labels returns them.
func (f FixedLabels) Labels() labels.Set { return labels.Set(f) }

// NodeLabels follows the labels of one Node (this host's) with an informer
// narrowed to it by a field selector: a label change reaches the agent at
// once, and nothing else about Nodes is held. Until the Node is seen, and
// while it does not exist, the host has no labels: it matches only pools
// that select every host.
type NodeLabels struct {
	client  kubernetes.Interface
	name    string
	changed func()

	synced chan struct{} // closed once the informer has listed

	mu     sync.Mutex
	labels labels.Set
}

// NewNodeLabels returns the labels of Node name; changed is called after
// they change. It starts nothing.
func NewNodeLabels(client kubernetes.Interface, name string, changed func()) *NodeLabels {
	return &NodeLabels{client: client, name: name, changed: changed, labels: labels.Set{}, synced: make(chan struct{})}
}

// Labels returns the Node's labels as last seen.
func (n *NodeLabels) Labels() labels.Set {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.labels
}

// Run watches the Node until ctx ends.
func (n *NodeLabels) Run(ctx context.Context) {
	lw := cache.NewListWatchFromClient(n.client.CoreV1().RESTClient(), "nodes", "", fields.OneTermEqualSelector("metadata.name", n.name))
	inf := cache.NewSharedIndexInformer(lw, &corev1.Node{}, 0, cache.Indexers{})
	_ = inf.SetTransform(func(obj any) (any, error) {
		if node, ok := obj.(*corev1.Node); ok {
			return &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name: node.Name, UID: node.UID, ResourceVersion: node.ResourceVersion, Labels: node.Labels,
			}}, nil
		}
		return obj, nil
	})
	set := func(obj any) {
		var l labels.Set
		if node, ok := obj.(*corev1.Node); ok {
			l = labels.Set(maps.Clone(node.Labels))
		}
		if l == nil {
			l = labels.Set{}
		}
		n.mu.Lock()
		same := maps.Equal(n.labels, l)
		n.labels = l
		n.mu.Unlock()
		if !same {
			klog.FromContext(ctx).Info("Host labels changed", "node", n.name, "labels", l.String())
			n.changed()
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, cur any) { set(cur) },
		DeleteFunc: func(any) { set(nil) },
	})
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			close(n.synced)
		}
	}()
	inf.RunWithContext(ctx)
}

// WaitSynced waits until the Node was listed (found or not), or ctx ends.
func (n *NodeLabels) WaitSynced(ctx context.Context) bool {
	select {
	case <-n.synced:
		return true
	case <-ctx.Done():
		return false
	}
}

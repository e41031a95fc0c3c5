// Package kubecore is the agent's client for the few core/v1 calls it
// makes (list, watch and get Nodes, and write Events), and the informer
// the agent and the router use for groundcloud's own objects
// (DynamicInformer).
//
// client-go's typed clients are generated against its scheme package, which
// registers every API group at start; importing any of them links every
// group's types, clients, informers and listers into the binary and touches
// their pages at start (so does client-go's dynamicinformer, through the
// informer factory it imports). The agent needs Nodes and Events only. This client
// decodes core/v1 alone, and its calls are the requests the typed client
// sends (same paths, verbs and bodies), so RBAC and the apiserver see no
// difference. docs/benchmarks.md ("Scale") has what it saves.
package kubecore

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// Scheme knows core/v1 and the meta types of its requests and watches.
var Scheme = runtime.NewScheme()

var codecs serializer.CodecFactory

func init() {
	if err := corev1.AddToScheme(Scheme); err != nil {
		panic(err)
	}
	metav1.AddToGroupVersion(Scheme, corev1.SchemeGroupVersion)
	codecs = serializer.NewCodecFactory(Scheme)
}

// Nodes is what the agent asks of Nodes. client-go's typed NodeInterface
// has these methods too (tests pass a fake clientset's).
type Nodes interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Node, error)
}

// Client calls the core/v1 API.
type Client struct {
	rest rest.Interface
}

// New builds a client from cfg (which it copies).
func New(cfg *rest.Config) (*Client, error) {
	c := rest.CopyConfig(cfg)
	gv := corev1.SchemeGroupVersion
	c.GroupVersion = &gv
	c.APIPath = "/api"
	c.NegotiatedSerializer = codecs.WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("core/v1 client: %w", err)
	}
	return &Client{rest: rc}, nil
}

// Nodes returns the client of Nodes.
func (c *Client) Nodes() Nodes { return nodes{c.rest} }

// Events returns an event sink for record.EventBroadcaster, writing each
// Event in its own namespace as client-go's EventSinkImpl does.
func (c *Client) Events() EventSink { return EventSink{c.rest} }

type nodes struct{ rest rest.Interface }

func (n nodes) List(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error) {
	out := &corev1.NodeList{}
	err := n.rest.Get().Resource("nodes").VersionedParams(&opts, metav1.ParameterCodec).Do(ctx).Into(out)
	return out, err
}

func (n nodes) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return n.rest.Get().Resource("nodes").VersionedParams(&opts, metav1.ParameterCodec).Watch(ctx)
}

func (n nodes) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Node, error) {
	out := &corev1.Node{}
	err := n.rest.Get().Resource("nodes").Name(name).VersionedParams(&opts, metav1.ParameterCodec).Do(ctx).Into(out)
	return out, err
}

// NodeInformer is an informer of every Node, each passed through transform
// before it is cached (nil: none), with the namespace index client-go's
// Node informer has.
func NodeInformer(n Nodes, transform cache.TransformFunc) cache.SharedIndexInformer {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return n.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return n.Watch(ctx, opts)
		},
	}
	// n may say that its watches cannot stream a list
	// (IsWatchListSemanticsUnSupported), as a fake clientset does.
	inf := cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, n), &corev1.Node{},
		cache.SharedIndexInformerOptions{
			Indexers:          cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
			ObjectDescription: "nodes",
		})
	if transform != nil {
		// SetTransform fails only once the informer runs; it has not started.
		_ = inf.SetTransform(transform)
	}
	return inf
}

// EventSink writes Events (record.EventSink).
type EventSink struct{ rest rest.Interface }

// Create posts a new Event.
func (s EventSink) Create(e *corev1.Event) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := s.rest.Post().NamespaceIfScoped(e.Namespace, e.Namespace != "").Resource("events").
		Body(e).Do(context.Background()).Into(out)
	return out, err
}

// Update replaces an Event.
func (s EventSink) Update(e *corev1.Event) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := s.rest.Put().NamespaceIfScoped(e.Namespace, e.Namespace != "").Resource("events").Name(e.Name).
		Body(e).Do(context.Background()).Into(out)
	return out, err
}

// Patch applies a strategic merge patch to an Event (the recorder's count
// and last timestamp of a repeated Event).
func (s EventSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := s.rest.Patch(types.StrategicMergePatchType).NamespaceIfScoped(e.Namespace, e.Namespace != "").
		Resource("events").Name(e.Name).Body(data).Do(context.Background()).Into(out)
	return out, err
}

package kubecore

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
)

// DynamicInformer is an informer over the objects of res in every
// namespace, as *unstructured.Unstructured, each passed through transform
// before it is cached (nil: none). It is the informer client-go's
// dynamicinformer builds, without that package: it imports the informer
// factory of every API group (see the package comment for what that costs).
func DynamicInformer(dyn dynamic.Interface, res schema.GroupVersionResource, resync time.Duration, transform cache.TransformFunc) cache.SharedIndexInformer {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return dyn.Resource(res).List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return dyn.Resource(res).Watch(ctx, opts)
		},
	}
	inf := cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, dyn), &unstructured.Unstructured{},
		cache.SharedIndexInformerOptions{
			ResyncPeriod:      resync,
			Indexers:          cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
			ObjectDescription: res.String(),
		})
	if transform != nil {
		// SetTransform fails only once the informer runs; it has not started.
		_ = inf.SetTransform(transform)
	}
	return inf
}

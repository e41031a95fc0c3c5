package ccm

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/informers"
)

// trimInformers makes the upstream controllers' shared Node and Service
// informers drop managedFields from the objects they cache, as
// kube-controller-manager and kube-scheduler do: no controller reads them,
// and they are a large part of every cached object. Writes are unaffected:
// an update without managedFields keeps the stored ones. It must run
// before the informers start (initCloud runs before every controller).
func trimInformers(f informers.SharedInformerFactory) {
	// Nodes: every default controller (cloud-node, cloud-node-lifecycle,
	// service, route) watches them, and so does the provider's
	// load-balancer manager, which also reads the Services.
	_ = f.Core().V1().Nodes().Informer().SetTransform(stripManagedFields)
	_ = f.Core().V1().Services().Informer().SetTransform(stripManagedFields)
}

// stripManagedFields is a cache.TransformFunc.
func stripManagedFields(obj any) (any, error) {
	if a, err := meta.Accessor(obj); err == nil && len(a.GetManagedFields()) > 0 {
		a.SetManagedFields(nil)
	}
	return obj, nil
}

package loadbalancers

import (
	"context"
	"fmt"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
)

// write creates or updates svc's LoadBalancer so that its spec is spec; it
// issues no request when the stored object already says so. A spec without
// ports keeps the object's ports (a Service that holds none of the ports it
// now lists, see DesiredSpec); there is nothing to create without them.
// An update that conflicts is tried once more over the stored object.
func (m *Manager) write(ctx context.Context, svc *v1.Service, spec v1alpha1.LoadBalancerSpec) error {
	key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	cached, err := m.lister.Get(svc.Namespace, svc.Name)
	if err != nil {
		return err
	}
	cur := m.written.current(key, cached)
	for attempt := 0; ; attempt++ {
		err := m.writeOver(ctx, svc, spec, cur)
		if attempt > 0 || !apierrors.IsConflict(err) {
			return err
		}
		if cur, err = m.client.Get(ctx, svc.Namespace, svc.Name); apierrors.IsNotFound(err) {
			cur = nil
		} else if err != nil {
			return fmt.Errorf("read LoadBalancer %s/%s: %w", svc.Namespace, svc.Name, err)
		}
	}
}

// writeOver writes spec over cur, the stored object or nil.
func (m *Manager) writeOver(ctx context.Context, svc *v1.Service, spec v1alpha1.LoadBalancerSpec, cur *v1alpha1.LoadBalancer) error {
	key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	owner := ownerReference(svc)
	if cur == nil {
		if len(spec.Ports) == 0 {
			return fmt.Errorf("service %s/%s: none of its ports is held by its load balancer; nothing to write", svc.Namespace, svc.Name)
		}
		created, stored, err := m.create(ctx, svc, spec, owner)
		if err != nil || created != nil {
			return err
		}
		cur = stored
	}
	if len(spec.Ports) == 0 {
		spec.Ports = cur.Spec.Ports
	}
	printed := PrintAnnotations(&spec)
	if equality.Semantic.DeepEqual(cur.Spec, spec) && hasOwner(cur, owner) && hasAnnotations(cur, printed) {
		return nil
	}
	next := cur.DeepCopy()
	next.Spec = spec
	for k, v := range printed {
		metav1.SetMetaDataAnnotation(&next.ObjectMeta, k, v)
	}
	if !hasOwner(next, owner) {
		next.OwnerReferences = append(removeServiceOwners(next.OwnerReferences), owner)
	}
	klog.FromContext(ctx).V(2).Info("Updating LoadBalancer", "loadBalancer", klog.KObj(next), "specChanged", !equality.Semantic.DeepEqual(cur.Spec, spec))
	updated, err := m.client.Update(ctx, next)
	if err != nil {
		return fmt.Errorf("update LoadBalancer %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	writes.WithLabelValues("update").Inc()
	m.written.remember(key, cur.ResourceVersion, updated)
	return nil
}

// create creates the LoadBalancer and returns it. When the object exists
// already (the cache is behind) it returns the stored object instead, for
// the caller to update.
func (m *Manager) create(ctx context.Context, svc *v1.Service, spec v1alpha1.LoadBalancerSpec, owner metav1.OwnerReference) (created, stored *v1alpha1.LoadBalancer, _ error) {
	lb := &v1alpha1.LoadBalancer{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: svc.Namespace, Name: svc.Name,
			OwnerReferences: []metav1.OwnerReference{owner},
			Annotations:     PrintAnnotations(&spec),
		},
		Spec: spec,
	}
	klog.FromContext(ctx).V(2).Info("Creating LoadBalancer", "loadBalancer", klog.KObj(lb))
	created, err := m.client.Create(ctx, lb)
	switch {
	case err == nil:
		writes.WithLabelValues("create").Inc()
		m.written.remember(types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}, "", created)
		return created, nil, nil
	case apierrors.IsAlreadyExists(err):
		stored, err := m.client.Get(ctx, svc.Namespace, svc.Name)
		if err != nil {
			return nil, nil, fmt.Errorf("read LoadBalancer %s/%s: %w", svc.Namespace, svc.Name, err)
		}
		return nil, stored, nil
	default:
		return nil, nil, fmt.Errorf("create LoadBalancer %s/%s: %w", svc.Namespace, svc.Name, err)
	}
}

func hasAnnotations(lb *v1alpha1.LoadBalancer, want map[string]string) bool {
	for k, v := range want {
		if got, ok := lb.Annotations[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func hasOwner(lb *v1alpha1.LoadBalancer, owner metav1.OwnerReference) bool {
	for _, o := range lb.OwnerReferences {
		if o.UID == owner.UID && o.Kind == owner.Kind && o.Name == owner.Name {
			return true
		}
	}
	return false
}

func removeServiceOwners(refs []metav1.OwnerReference) []metav1.OwnerReference {
	return slices.DeleteFunc(slices.Clone(refs), func(o metav1.OwnerReference) bool {
		return o.Kind == "Service" && o.APIVersion == "v1"
	})
}

// writeCache lets the Manager read its own writes before the informer
// delivers them: a second write for a Service soon after the first (the
// queue right after Ensure, say) would otherwise compare against the old
// object, write again and conflict. An entry lives until the informer
// shows the object at another resourceVersion than the one it replaced.
type writeCache struct {
	mu sync.Mutex
	m  map[types.NamespacedName]lastWrite
}

// lastWrite is an object the Manager wrote, and the resourceVersion of the
// object it replaced ("" for a create).
type lastWrite struct {
	base string
	obj  *v1alpha1.LoadBalancer
}

// current returns the newer of cached (the informer's object, or nil) and
// what the Manager last wrote for key.
func (c *writeCache) current(key types.NamespacedName, cached *v1alpha1.LoadBalancer) *v1alpha1.LoadBalancer {
	rv := ""
	if cached != nil {
		rv = cached.ResourceVersion
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if w, ok := c.m[key]; ok && w.base == rv {
		return w.obj
	}
	return cached
}

func (c *writeCache) remember(key types.NamespacedName, base string, obj *v1alpha1.LoadBalancer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[key] = lastWrite{base: base, obj: obj}
}

// observed is told each resourceVersion the informer delivers for key.
func (c *writeCache) observed(key types.NamespacedName, rv string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w, ok := c.m[key]; ok && w.base != rv {
		delete(c.m, key)
	}
}

func (c *writeCache) forget(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, key)
}

package loadbalancers

import (
	"context"
	"hash/fnv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/lbclass"
)

// queueWorkers refresh LoadBalancers in parallel; the client's rate limit
// is the real bound.
const queueWorkers = 8

// watch registers the event handlers that feed the queue: a LoadBalancer
// deleted (re-created if its Service still holds addresses) or whose spec
// someone changed (written back).
func (m *Manager) watch(ctx context.Context) {
	logger := klog.FromContext(ctx)
	_, err := m.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if lb, ok := obj.(*v1alpha1.LoadBalancer); ok {
				m.written.observed(keyOfLB(lb), lb.ResourceVersion)
				m.noteInUse(ctx, keyOfLB(lb), lb)
			}
		},
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*v1alpha1.LoadBalancer)
			c, ok2 := cur.(*v1alpha1.LoadBalancer)
			if !ok1 || !ok2 {
				return
			}
			m.written.observed(keyOfLB(c), c.ResourceVersion)
			m.noteInUse(ctx, keyOfLB(c), c)
			if o.Generation != c.Generation {
				m.queue.Add(keyOfLB(c))
			}
		},
		DeleteFunc: func(obj any) {
			k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
			if err != nil {
				return
			}
			ns, name, err := cache.SplitMetaNamespaceKey(k)
			if err != nil {
				return
			}
			key := types.NamespacedName{Namespace: ns, Name: name}
			m.written.forget(key)
			m.noteInUse(ctx, key, nil)
			m.queue.Add(key)
		},
	})
	if err != nil {
		logger.Error(err, "Cannot watch LoadBalancers; deleted objects will not be re-created")
	}
}

// reconcile runs the queue's workers until ctx ends.
func (m *Manager) reconcile(ctx context.Context) {
	defer m.queue.ShutDown()
	for range queueWorkers {
		go wait.UntilWithContext(ctx, func(ctx context.Context) {
			for m.processNext(ctx) {
			}
		}, time.Second)
	}
	<-ctx.Done()
}

func (m *Manager) processNext(ctx context.Context) bool {
	key, quit := m.queue.Get()
	if quit {
		return false
	}
	defer m.queue.Done(key)
	if err := m.refresh(ctx, key); err != nil {
		klog.FromContext(ctx).Error(err, "Cannot refresh LoadBalancer; retrying", "loadBalancer", key)
		m.queue.AddRateLimited(key)
		return true
	}
	m.queue.Forget(key)
	return true
}

// refresh writes the LoadBalancer of key from the Service as it is now,
// and what the allocator holds for it; it creates the
// object again if it is gone. It does nothing for a Service that holds no
// addresses (only Ensure assigns them), is gone, is being deleted, or no
// longer wants a load balancer from this provider: the service controller
// then calls Delete.
func (m *Manager) refresh(ctx context.Context, key types.NamespacedName) error {
	defer m.locks.lock(key)()
	svc, err := m.services.Services(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !wantsLoadBalancer(svc) {
		return nil
	}
	if moved, err := m.moveInUse(ctx, svc); moved || err != nil {
		return err
	}
	a, ok := m.held(key)
	if !ok {
		return nil
	}
	// Source-range problems are reported by Ensure; the spec already
	// accepts no client.
	spec, _ := m.desiredSpec(svc, a)
	return m.write(ctx, svc, spec)
}

// wantsLoadBalancer is the test of the controllers that call the provider
// (upstream's controllers/service wantsLoadBalancer and needsCleanup, and
// internal/lbclass): type LoadBalancer, no loadBalancerClass or
// groundcloud's, not being deleted.
func wantsLoadBalancer(svc *v1.Service) bool {
	if svc.Spec.Type != v1.ServiceTypeLoadBalancer || svc.DeletionTimestamp != nil {
		return false
	}
	return svc.Spec.LoadBalancerClass == nil || lbclass.Served(svc)
}

func keyOfLB(lb *v1alpha1.LoadBalancer) types.NamespacedName {
	return types.NamespacedName{Namespace: lb.Namespace, Name: lb.Name}
}

// keyLocks serialises the work on one Service (Ensure, Delete, refresh)
// without a lock per Service: keys share a few stripes.
type keyLocks [64]sync.Mutex

// lock locks key's stripe and returns the unlock.
func (l *keyLocks) lock(key types.NamespacedName) func() {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key.Namespace))
	_, _ = h.Write([]byte{'/'})
	_, _ = h.Write([]byte(key.Name))
	mu := &l[h.Sum32()%uint32(len(l))]
	mu.Lock()
	return mu.Unlock
}

// enqueueAll queues every LoadBalancer.
func (m *Manager) enqueueAll() {
	lbs, err := m.lister.List()
	if err != nil {
		return
	}
	for _, lb := range lbs {
		m.queue.Add(keyOfLB(lb))
	}
}

package loadbalancers

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/cloud-provider/api"
	"k8s.io/klog/v2"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/addresspools"
	"github.com/groundcloud/groundcloud/internal/config"
	"github.com/groundcloud/groundcloud/internal/crdinstall"
	"github.com/groundcloud/groundcloud/internal/ipam"
	"github.com/groundcloud/groundcloud/internal/lbapi"
)

// FieldManager is the controller manager's name in managedFields.
const FieldManager = "groundcloud-controller-manager"

// retryNotReady is how long the service controller waits before asking again
// while the allocator is still being rebuilt.
const retryNotReady = time.Second

// readyWait is how long Ensure and Delete wait for the allocator's
// rebuild before they ask the service controller to retry. Waiting, rather
// than failing at once, spares every Service a SyncLoadBalancerFailed
// Event and a second EnsuringLoadBalancer Event at each start of the
// controller manager: the service controller calls Ensure for every
// Service as soon as it starts, usually before the LoadBalancer informer
// has synced (a second or two at 1,000 Services).
var readyWait = 30 * time.Second

// errNotReady: the allocator has not been rebuilt from the records yet.
var errNotReady = errors.New("load balancer records are still being read; retrying")

// Manager ensures LoadBalancer objects for Services.
//
// Ensure is the only path that assigns addresses. Everything else refreshes
// what the allocator already holds: the reconcile queue (reconcile.go)
// re-creates an object deleted behind its back, writes back a spec someone
// else changed, and rewrites those a reload changes. Nodes are not part of
// the objects: agents follow the Nodes themselves (internal/backends), so a
// node change writes nothing.
// Ensure, Delete and the queue hold a per-Service lock, so a refresh never
// writes for a Service after its Delete has released it.
type Manager struct {
	dyn    dynamic.Interface
	client *lbapi.Client
	config func() *config.Config

	informer cache.SharedIndexInformer
	lister   lbapi.Lister
	services corelisters.ServiceLister
	svcSync  cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[types.NamespacedName]
	locks    keyLocks
	written  writeCache
	ready    chan struct{}               // closed once the allocator is rebuilt
	install  func(context.Context) error // the CRDs

	mu        sync.Mutex // guards alloc, pools, kept and inUse
	alloc     *ipam.Allocator
	poolsFrom *config.Config
	kept      keptAnnounces
	inUse     *inUseTracker
	inUseSet  []netip.Addr // what alloc was last given (SetInUse)

	events  EventRecorder // on Services: orphaned addresses
	orphans *orphanReporter
	pools   *addresspools.Reporter // the AddressPool objects
}

// NewManager returns a Manager; config returns the current cloud-config,
// cluster is the controller manager's shared informer factory, whose
// Service cache the Manager reads (it registers them; the caller
// starts the factory), and events (nil: none) records Events on Services.
// It starts nothing: call Run.
func NewManager(dyn dynamic.Interface, cfg func() *config.Config, cluster informers.SharedInformerFactory, events EventRecorder) *Manager {
	if events == nil {
		events = discardEvents{}
	}
	inf := lbapi.NewInformer(dyn, 0)
	services := cluster.Core().V1().Services()
	m := &Manager{
		dyn: dyn, client: lbapi.NewClient(dyn), config: cfg,
		informer: inf, lister: lbapi.NewLister(inf),
		services: services.Lister(), svcSync: services.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName](),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "groundcloud_loadbalancers"}),
		written: writeCache{m: map[types.NamespacedName]lastWrite{}},
		ready:   make(chan struct{}),
		kept:    keptAnnounces{},
		inUse:   newInUseTracker(),
		install: func(ctx context.Context) error { return crdinstall.All(ctx, dyn, FieldManager) },
		events:  events, orphans: newOrphanReporter(),
	}
	m.pools = addresspools.NewReporter(dyn, FieldManager, m.poolSnapshot)
	return m
}

// Run installs the CRDs, starts the informer, waits for it and the Service
// cache, rebuilds the allocator from the LoadBalancer objects, and
// then serves Ensure calls and the reconcile queue, and reports orphaned
// addresses, until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	for {
		err := m.install(ctx)
		if err == nil {
			break
		}
		logger.Error(err, "Cannot install CRDs; retrying")
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Second):
		}
	}
	m.watch(ctx)
	go m.informer.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), m.informer.HasSynced, m.svcSync) {
		return
	}
	m.rebuild(ctx)
	close(m.ready)
	m.orphans.due()
	go m.reportOrphans(ctx)
	go m.forgetInUse(ctx)
	go m.pools.Run(ctx)
	m.reconcile(ctx)
}

// usageChanged publishes the allocator's usage: the metric at once, the
// AddressPool objects soon. Callers hold mu.
func (m *Manager) usageChanged() {
	recordUsage(m.alloc.Usage())
	m.pools.Due()
}

// poolSnapshot is what the AddressPool objects show.
func (m *Manager) poolSnapshot() addresspools.Snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	return addresspools.Snapshot{Pools: m.poolsFrom.Pools, Usage: m.alloc.Usage(), Orphans: orphanedAddresses(m.alloc.Orphans())}
}

// rebuild restores every record into a fresh allocator, oldest first, so
// that if two records ever collide the older keeps its address.
func (m *Manager) rebuild(ctx context.Context) {
	logger := klog.FromContext(ctx)
	lbs, err := m.lister.List()
	if err != nil {
		logger.Error(err, "Cannot list LoadBalancers")
	}
	slices.SortFunc(lbs, func(a, b *v1alpha1.LoadBalancer) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return compareKeys(a, b)
	})
	m.mu.Lock()
	defer m.mu.Unlock()
	cfg := m.config()
	m.alloc, m.poolsFrom = ipam.New(cfg.Pools), cfg
	m.inUseSet = nil
	m.applyInUse(ctx, time.Now())
	for _, lb := range lbs {
		alloc, terms, err := m.recordOf(lb)
		if err == nil {
			err = m.alloc.Restore(keyOfLB(lb), alloc, terms)
		}
		if err != nil {
			logger.Error(err, "Cannot restore address record; its Service will be re-ensured", "loadBalancer", klog.KObj(lb))
			continue
		}
		m.keepRecordAnnounce(lb)
	}
	m.usageChanged()
	logger.Info("Rebuilt address allocator", "records", len(lbs))
}

// recordOf reads the allocation record in a LoadBalancer, with the
// forwarding its Service asks for now (none when it is gone).
func (m *Manager) recordOf(lb *v1alpha1.LoadBalancer) (ipam.Allocation, ipam.Terms, error) {
	alloc, ports, err := allocationOf(lb)
	if err != nil {
		return ipam.Allocation{}, ipam.Terms{}, err
	}
	terms := ipam.Terms{SharingKey: lb.Spec.SharingKey, Ports: ports, Served: recordForwarding(&lb.Spec)}
	if svc, err := m.services.Services(lb.Namespace).Get(lb.Name); err == nil {
		terms.Forwarding, _ = ipam.ServiceForwarding(svc)
	}
	return alloc, terms, nil
}

func compareKeys(a, b *v1alpha1.LoadBalancer) int {
	if a.Namespace != b.Namespace {
		if a.Namespace < b.Namespace {
			return -1
		}
		return 1
	}
	switch {
	case a.Name < b.Name:
		return -1
	case a.Name > b.Name:
		return 1
	}
	return 0
}

// Ensure assigns addresses to svc, writes its LoadBalancer if anything
// changed, and returns the Service's load-balancer status. The nodes the
// service controller passes are not used: agents choose the backends from
// the Nodes themselves (internal/backends).
//
// A request that cannot be met changes nothing for a Service that holds
// nothing yet: it is refused with the reason, nothing allocated. A Service
// that holds addresses keeps them and everything that does not depend on
// the request is still applied (source ranges, traffic policy,
// health check, affinity, node ports of the ports it holds); the error is
// returned all the same, so that the service controller reports it as a
// Warning and retries. Source ranges that cannot all be used make the
// load balancer accept no client.
func (m *Manager) Ensure(ctx context.Context, svc *v1.Service, _ []*v1.Node) (*v1.LoadBalancerStatus, error) {
	if err := m.waitReady(ctx); err != nil {
		return nil, err
	}
	key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	defer m.locks.lock(key)()

	a, held, reqErr := m.assign(svc)
	if !held {
		return nil, reqErr
	}
	spec, rangeErr := m.desiredSpec(svc, a)
	// A failed write keeps the allocation: the object may exist even when
	// the request failed, and releasing the address could hand it out
	// twice. Get reports the allocation, so the service controller still
	// deletes it with the Service; the next attempt writes the same address.
	if err := m.write(ctx, svc, spec); err != nil {
		return nil, errors.Join(reqErr, err)
	}
	if err := errors.Join(reqErr, rangeErr); err != nil {
		return nil, err
	}
	// As upstream's "Ensuring load balancer" (V(2) too), but when done.
	klog.FromContext(ctx).V(2).Info("Ensured LoadBalancer", "service", klog.KObj(svc), "addresses", spec.Addresses)
	return ServiceStatus(&spec), nil
}

// desiredSpec is DesiredSpec with the cloud-config's cluster health
// check; a forwarding annotation it cannot use is reported with the source
// ranges' problem.
func (m *Manager) desiredSpec(svc *v1.Service, a Allocated) (v1alpha1.LoadBalancerSpec, error) {
	spec, rangeErr := DesiredSpec(svc, a, m.config().Global.ClusterHealthCheck)
	return spec, errors.Join(rangeErr, forwardingProblem(svc, a.Forwarding), nodePortProblem(svc, spec.Forwarding))
}

// assign reads svc's request and assigns it. It returns what the Service
// holds afterwards and whether it holds anything, and why the request was
// not met: then what it held before is returned unchanged. Source ranges
// are part of the request only for a Service that holds nothing yet.
func (m *Manager) assign(svc *v1.Service) (Allocated, bool, error) {
	key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	req, reqErr := ipam.RequestFromService(svc)
	reqErr = errors.Join(checkPorts(svc), reqErr)

	m.mu.Lock()
	defer m.mu.Unlock()
	if m.refreshPools() {
		m.orphans.due()
	}
	prev, held := m.heldLocked(key)
	if !held {
		if _, err := SourceRanges(svc); err != nil {
			reqErr = errors.Join(reqErr, err)
		}
	}
	if reqErr != nil {
		return prev, held, reqErr
	}
	if _, err := m.alloc.Assign(req); err != nil {
		return prev, held, err
	}
	if _, served := m.alloc.ServingPool(key); served {
		delete(m.kept, key)
	}
	m.usageChanged()
	m.noteOrphan(key)
	a, _ := m.heldLocked(key)
	return a, true, nil
}

// heldLocked returns what key holds, and whether it holds anything.
// Callers hold mu.
func (m *Manager) heldLocked(key types.NamespacedName) (Allocated, bool) {
	alloc, ok := m.alloc.Lookup(key)
	if !ok {
		return Allocated{}, false
	}
	terms, _ := m.alloc.Terms(key)
	return Allocated{
		Allocation: alloc, SharingKey: terms.SharingKey, Ports: terms.Ports,
		Forwarding: terms.Served, Announce: m.announceLocked(key),
	}, true
}

// held returns what key holds.
func (m *Manager) held(key types.NamespacedName) (Allocated, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.heldLocked(key)
}

// isReady reports whether the allocator is rebuilt.
func (m *Manager) isReady() bool {
	select {
	case <-m.ready:
		return true
	default:
		return false
	}
}

// waitReady returns nil once the allocator is rebuilt, waiting up to
// readyWait; then a RetryError (or ctx's error).
func (m *Manager) waitReady(ctx context.Context) error {
	if m.isReady() {
		return nil
	}
	t := time.NewTimer(readyWait)
	defer t.Stop()
	select {
	case <-m.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return api.NewRetryError(errNotReady.Error(), retryNotReady)
	}
}

// refreshPools applies a reloaded cloud-config's pools and reports
// whether there was one. The LoadBalancers whose spec the reload changes
// follow through the queue: those a pool edit serves otherwise (forwarding,
// announce, hosts, BGP attributes), or all of them when the cluster health
// check changed. Callers hold mu.
func (m *Manager) refreshPools() bool {
	cfg := m.config()
	if cfg == m.poolsFrom {
		return false
	}
	before := m.servingAll()
	m.alloc.SetPools(cfg.Pools)
	m.keepAnnounces(m.poolsFrom)
	if m.poolsFrom.Global.ClusterHealthCheck != cfg.Global.ClusterHealthCheck {
		m.enqueueAll() // every LoadBalancer's health check follows
	} else {
		m.enqueueChanged(before)
	}
	m.poolsFrom = cfg
	m.pools.Due()
	m.queueMoves() // a pool may move Services off addresses in use now
	return true
}

// Delete releases svc's addresses and deletes its LoadBalancer. It releases
// them also when there is no object (a create that failed).
func (m *Manager) Delete(ctx context.Context, svc *v1.Service) error {
	if err := m.waitReady(ctx); err != nil {
		return err
	}
	key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	defer m.locks.lock(key)()
	klog.FromContext(ctx).V(2).Info("Deleting LoadBalancer", "service", klog.KObj(svc))
	err := m.client.Delete(ctx, svc.Namespace, svc.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete LoadBalancer %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	if err == nil {
		writes.WithLabelValues("delete").Inc()
	}
	m.written.forget(key)
	m.mu.Lock()
	m.alloc.Release(key)
	delete(m.kept, key)
	m.usageChanged()
	m.noteOrphan(key)
	m.mu.Unlock()
	return nil
}

// Get reports whether svc has a load balancer, and its status: it has one
// when the allocator holds addresses for it (whether or not its object was
// written) or when its object exists.
func (m *Manager) Get(ctx context.Context, svc *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	if !m.isReady() {
		lb, err := m.client.Get(ctx, svc.Namespace, svc.Name)
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		return ServiceStatus(&lb.Spec), true, nil
	}
	if a, ok := m.held(types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}); ok {
		spec := v1alpha1.LoadBalancerSpec{Forwarding: apiForwarding(a.Forwarding)}
		for _, addr := range a.Addresses {
			spec.Addresses = append(spec.Addresses, addr.String())
		}
		return ServiceStatus(&spec), true, nil
	}
	lb, err := m.lister.Get(svc.Namespace, svc.Name)
	if err != nil || lb == nil {
		return nil, false, err
	}
	return ServiceStatus(&lb.Spec), true, nil
}

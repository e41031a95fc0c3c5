package loadbalancers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/cloud-provider/api"
	"k8s.io/klog/v2"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/config"
	"github.com/groundcloud/groundcloud/internal/inventory"
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
type Manager struct {
	dyn    dynamic.Interface
	client *lbapi.Client
	config func() *config.Config

	informer cache.SharedIndexInformer
	lister   lbapi.Lister
	ready    chan struct{}               // closed once the allocator is rebuilt
	install  func(context.Context) error // the CRDs

	mu        sync.Mutex // guards alloc and pools
	alloc     *ipam.Allocator
	poolsFrom *config.Config

	events  EventRecorder // on Services: orphaned addresses
	orphans *orphanReporter
}

// NewManager returns a Manager; config returns the current cloud-config,
// and events (nil: none) records Events on Services. It starts nothing:
// call Run.
func NewManager(dyn dynamic.Interface, cfg func() *config.Config, events EventRecorder) *Manager {
	if events == nil {
		events = discardEvents{}
	}
	inf := lbapi.NewInformer(dyn, 0)
	return &Manager{
		dyn: dyn, client: lbapi.NewClient(dyn), config: cfg,
		informer: inf, lister: lbapi.NewLister(inf), ready: make(chan struct{}),
		install: func(ctx context.Context) error { return lbapi.InstallCRDs(ctx, dyn, FieldManager) },
		events:  events, orphans: newOrphanReporter(),
	}
}

// Run installs the CRDs, starts the informer, rebuilds the allocator from
// the LoadBalancer objects, and then serves Ensure calls and reports
// orphaned addresses until ctx ends.
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
	go m.informer.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), m.informer.HasSynced) {
		return
	}
	m.rebuild(ctx)
	close(m.ready)
	m.orphans.due()
	m.reportOrphans(ctx)
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
	for _, lb := range lbs {
		alloc, ports, err := allocationOf(lb)
		if err == nil {
			err = m.alloc.Restore(types.NamespacedName{Namespace: lb.Namespace, Name: lb.Name}, alloc, lb.Spec.SharingKey, ports)
		}
		if err != nil {
			logger.Error(err, "Cannot restore address record; its Service will be re-ensured", "loadBalancer", klog.KObj(lb))
		}
	}
	recordUsage(m.alloc.Usage())
	logger.Info("Rebuilt address allocator", "records", len(lbs))
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
// changed, and returns the Service's load-balancer status. On error nothing
// new stays allocated.
func (m *Manager) Ensure(ctx context.Context, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	if err := m.waitReady(ctx); err != nil {
		return nil, err
	}
	if err := checkPorts(svc); err != nil {
		return nil, err
	}
	req, err := ipam.RequestFromService(svc)
	if err != nil {
		return nil, err
	}

	m.mu.Lock()
	if m.refreshPools() {
		m.orphans.due()
	}
	alloc, err := m.alloc.Assign(req)
	if err == nil {
		recordUsage(m.alloc.Usage())
		m.noteOrphan(req.Key)
	}
	m.mu.Unlock()
	if err != nil {
		return nil, err
	}

	// A failed write keeps the allocation: the object may exist even when
	// the request failed, and releasing the address could hand it out
	// twice. The next attempt writes the same address; deleting the
	// Service releases it.
	spec := DesiredSpec(svc, nodes, m.inventoryAddresses(), alloc, req.SharingKey)
	if err := m.write(ctx, svc, spec); err != nil {
		return nil, err
	}
	// As upstream's "Ensuring load balancer" (V(2) too), but when done.
	klog.FromContext(ctx).V(2).Info("Ensured LoadBalancer", "service", klog.KObj(svc), "addresses", spec.Addresses)
	return ServiceStatus(&spec), nil
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

// inventoryAddresses gives a node's addresses from the cloud-config
// inventory, as the cloud-node controller will write them.
func (m *Manager) inventoryAddresses() AddressFallback {
	cfg := m.config()
	return func(n *v1.Node) []v1.NodeAddress {
		if match := inventory.Lookup(cfg, n); match.Machine != nil {
			return match.Machine.Addresses
		}
		return nil
	}
}

// refreshPools applies a reloaded cloud-config's pools and reports whether
// there was one. Callers hold mu.
func (m *Manager) refreshPools() bool {
	cfg := m.config()
	if cfg == m.poolsFrom {
		return false
	}
	m.alloc.SetPools(cfg.Pools)
	m.poolsFrom = cfg
	return true
}

// write creates or updates the LoadBalancer so that its spec is spec; it
// issues no request when the stored object already says so.
func (m *Manager) write(ctx context.Context, svc *v1.Service, spec v1alpha1.LoadBalancerSpec) error {
	cur, err := m.lister.Get(svc.Namespace, svc.Name)
	if err != nil {
		return err
	}
	owner := ownerReference(svc)
	if cur == nil {
		if cur, err = m.create(ctx, svc, spec, owner); cur == nil || err != nil {
			return err
		}
	}
	ports := PortsSummary(&spec)
	if equality.Semantic.DeepEqual(cur.Spec, spec) && hasOwner(cur, owner) && cur.Annotations[v1alpha1.AnnotationPorts] == ports {
		return nil
	}
	next := cur.DeepCopy()
	next.Spec = spec
	metav1.SetMetaDataAnnotation(&next.ObjectMeta, v1alpha1.AnnotationPorts, ports)
	if !hasOwner(next, owner) {
		next.OwnerReferences = append(removeServiceOwners(next.OwnerReferences), owner)
	}
	klog.FromContext(ctx).V(2).Info("Updating LoadBalancer", "loadBalancer", klog.KObj(next), "specChanged", !equality.Semantic.DeepEqual(cur.Spec, spec))
	_, err = m.client.Update(ctx, next)
	if err != nil {
		return fmt.Errorf("update LoadBalancer %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	writes.WithLabelValues("update").Inc()
	return nil
}

// create creates the LoadBalancer. When the object exists already (the
// cache is behind) it returns the stored object for the caller to update;
// otherwise it returns nil.
func (m *Manager) create(ctx context.Context, svc *v1.Service, spec v1alpha1.LoadBalancerSpec, owner metav1.OwnerReference) (*v1alpha1.LoadBalancer, error) {
	lb := &v1alpha1.LoadBalancer{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: svc.Namespace, Name: svc.Name,
			OwnerReferences: []metav1.OwnerReference{owner},
			Annotations:     map[string]string{v1alpha1.AnnotationPorts: PortsSummary(&spec)},
		},
		Spec: spec,
	}
	klog.FromContext(ctx).V(2).Info("Creating LoadBalancer", "loadBalancer", klog.KObj(lb))
	_, err := m.client.Create(ctx, lb)
	switch {
	case err == nil:
		writes.WithLabelValues("create").Inc()
		return nil, nil
	case apierrors.IsAlreadyExists(err):
		stored, err := m.client.Get(ctx, svc.Namespace, svc.Name)
		if err != nil {
			return nil, fmt.Errorf("read LoadBalancer %s/%s: %w", svc.Namespace, svc.Name, err)
		}
		return stored, nil
	default:
		return nil, fmt.Errorf("create LoadBalancer %s/%s: %w", svc.Namespace, svc.Name, err)
	}
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

// Delete releases svc's addresses and deletes its LoadBalancer.
func (m *Manager) Delete(ctx context.Context, svc *v1.Service) error {
	if err := m.waitReady(ctx); err != nil {
		return err
	}
	klog.FromContext(ctx).V(2).Info("Deleting LoadBalancer", "service", klog.KObj(svc))
	err := m.client.Delete(ctx, svc.Namespace, svc.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete LoadBalancer %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	if err == nil {
		writes.WithLabelValues("delete").Inc()
	}
	m.mu.Lock()
	key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	m.alloc.Release(key)
	recordUsage(m.alloc.Usage())
	m.noteOrphan(key)
	m.mu.Unlock()
	return nil
}

// Get reports whether svc has a LoadBalancer, and its status.
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
	lb, err := m.lister.Get(svc.Namespace, svc.Name)
	if err != nil || lb == nil {
		return nil, false, err
	}
	return ServiceStatus(&lb.Spec), true, nil
}

// checkPorts refuses what the data plane cannot carry, with what to change.
func checkPorts(svc *v1.Service) error {
	if len(svc.Spec.Ports) == 0 {
		return fmt.Errorf("service %s/%s has no ports; add at least one", svc.Namespace, svc.Name)
	}
	for _, p := range svc.Spec.Ports {
		if p.Protocol != v1.ProtocolTCP && p.Protocol != v1.ProtocolUDP {
			return fmt.Errorf("service %s/%s port %d: protocol %s is not supported by groundcloud; use TCP or UDP", svc.Namespace, svc.Name, p.Port, p.Protocol)
		}
		if p.NodePort == 0 {
			return fmt.Errorf("service %s/%s port %d has no nodePort; groundcloud sends traffic to node ports, so leave spec.allocateLoadBalancerNodePorts unset or true", svc.Namespace, svc.Name, p.Port)
		}
	}
	return nil
}

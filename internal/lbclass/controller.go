package lbclass

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"
	servicehelper "k8s.io/cloud-provider/service/helpers"
	"k8s.io/klog/v2"
)

// EventComponent is the source of the controller's Events.
const EventComponent = "groundcloud-service-lb-class-controller"

// Controller serves the Services of Class with a cloudprovider.LoadBalancer.
type Controller struct {
	lb          cloudprovider.LoadBalancer
	client      kubernetes.Interface
	clusterName string
	services    corelisters.ServiceLister
	nodes       corelisters.NodeLister
	synced      []cache.InformerSynced
	serviceInf  cache.SharedIndexInformer
	queue       workqueue.TypedRateLimitingInterface[string]
	recorder    record.EventRecorder
	broadcaster record.EventBroadcaster
}

// New returns a Controller over the controller manager's shared Service
// and Node informers; it registers its handlers in Run and starts nothing.
func New(lb cloudprovider.LoadBalancer, client kubernetes.Interface, services coreinformers.ServiceInformer, nodes coreinformers.NodeInformer, clusterName string) *Controller {
	b := record.NewBroadcaster()
	return &Controller{
		lb: lb, client: client, clusterName: clusterName,
		services: services.Lister(), nodes: nodes.Lister(),
		synced:     []cache.InformerSynced{services.Informer().HasSynced, nodes.Informer().HasSynced},
		serviceInf: services.Informer(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "groundcloud_service_lb_class"}),
		broadcaster: b,
		recorder:    b.NewRecorder(scheme.Scheme, v1.EventSource{Component: EventComponent}),
	}
}

// Run watches the Services and serves those of Class with workers
// goroutines until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	logger := klog.FromContext(ctx)
	defer c.queue.ShutDown()
	c.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.client.CoreV1().Events("")})
	defer c.broadcaster.Shutdown()
	if _, err := c.serviceInf.AddEventHandler(c.handlers()); err != nil {
		logger.Error(err, "Cannot watch Services; Services of the class are not served", "class", Class)
		return
	}
	logger.Info("Starting load-balancer class controller", "class", Class, "workers", workers)
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return
	}
	for range max(workers, 1) {
		go wait.UntilWithContext(ctx, func(ctx context.Context) {
			for c.processNext(ctx) {
			}
		}, time.Second)
	}
	<-ctx.Done()
}

func (c *Controller) handlers() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if svc, ok := obj.(*v1.Service); ok && relevant(svc) {
				c.enqueue(svc)
			}
		},
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*v1.Service)
			n, ok2 := cur.(*v1.Service)
			if ok1 && ok2 && needsSync(o, n) {
				c.enqueue(n)
			}
		},
		// A Service of the class goes only after its finalizer is removed;
		// one whose finalizer someone else removed still holds addresses.
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if svc, ok := obj.(*v1.Service); ok && (Served(svc) || slices.Contains(svc.Finalizers, Finalizer)) {
				c.enqueue(svc)
			}
		},
	}
}

func (c *Controller) enqueue(svc *v1.Service) {
	c.queue.Add(svc.Namespace + "/" + svc.Name)
}

func (c *Controller) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	err := c.sync(ctx, key)
	var retry *api.RetryError
	switch {
	case err == nil:
		c.queue.Forget(key)
	case errors.As(err, &retry):
		klog.FromContext(ctx).V(2).Info("Retrying Service later", "service", key, "after", retry.RetryAfter(), "reason", err.Error())
		c.queue.AddAfter(key, retry.RetryAfter())
	default:
		klog.FromContext(ctx).Error(err, "Cannot sync Service; retrying", "service", key)
		c.queue.AddRateLimited(key)
	}
	return true
}

// sync does for the Service of key what plan says.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	svc, err := c.services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return c.gone(ctx, ns, name)
	}
	if err != nil {
		return err
	}
	svc = svc.DeepCopy()
	switch plan(svc) {
	case actionEnsure:
		return c.ensure(ctx, svc)
	case actionCleanup:
		return c.cleanup(ctx, svc)
	}
	return nil
}

// ensure adds the finalizer, ensures the load balancer and writes the
// status, as upstream's service controller does.
func (c *Controller) ensure(ctx context.Context, svc *v1.Service) error {
	klog.FromContext(ctx).V(2).Info("Ensuring load balancer", "service", klog.KObj(svc), "class", Class)
	c.recorder.Event(svc, v1.EventTypeNormal, "EnsuringLoadBalancer", "Ensuring load balancer")
	if err := c.addFinalizer(svc); err != nil {
		return fmt.Errorf("add finalizer %s: %w", Finalizer, err)
	}
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	status, err := c.lb.EnsureLoadBalancer(ctx, c.clusterName, svc, nodes)
	if err == nil && status == nil {
		err = errors.New("the provider returned no status")
	}
	if err != nil {
		c.recorder.Eventf(svc, v1.EventTypeWarning, "SyncLoadBalancerFailed", "Error syncing load balancer: %v", err)
		return fmt.Errorf("ensure load balancer: %w", err)
	}
	c.recorder.Event(svc, v1.EventTypeNormal, "EnsuredLoadBalancer", "Ensured load balancer")
	return c.patchStatus(svc, status)
}

// cleanup deletes the load balancer, clears the status and then removes
// the finalizer: the status is cleared while the Service still carries it,
// so that no controller it passes to has written an address yet.
func (c *Controller) cleanup(ctx context.Context, svc *v1.Service) error {
	_, exists, err := c.lb.GetLoadBalancer(ctx, c.clusterName, svc)
	if err != nil {
		return fmt.Errorf("check whether the load balancer exists: %w", err)
	}
	if exists {
		klog.FromContext(ctx).V(2).Info("Deleting load balancer", "service", klog.KObj(svc), "class", Class)
		c.recorder.Event(svc, v1.EventTypeNormal, "DeletingLoadBalancer", "Deleting load balancer")
		if err := c.lb.EnsureLoadBalancerDeleted(ctx, c.clusterName, svc); err != nil {
			c.recorder.Eventf(svc, v1.EventTypeWarning, "DeleteLoadBalancerFailed", "Error deleting load balancer: %v", err)
			return fmt.Errorf("delete load balancer: %w", err)
		}
	}
	if err := c.patchStatus(svc, &v1.LoadBalancerStatus{}); err != nil {
		return err
	}
	if err := c.patchFinalizers(svc, otherFinalizers(svc)); err != nil {
		return fmt.Errorf("remove finalizer %s: %w", Finalizer, err)
	}
	c.recorder.Event(svc, v1.EventTypeNormal, "DeletedLoadBalancer", "Deleted load balancer")
	return nil
}

// gone releases what a Service that no longer exists still holds: its
// finalizer was removed by someone else. It is a no-op for one that holds
// nothing.
func (c *Controller) gone(ctx context.Context, ns, name string) error {
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	_, exists, err := c.lb.GetLoadBalancer(ctx, c.clusterName, svc)
	if err != nil || !exists {
		return err
	}
	klog.FromContext(ctx).Info("Service is gone without its load balancer being deleted; deleting it", "service", klog.KObj(svc))
	return c.lb.EnsureLoadBalancerDeleted(ctx, c.clusterName, svc)
}

// addFinalizer adds the finalizer to svc unless it carries it already.
func (c *Controller) addFinalizer(svc *v1.Service) error {
	if slices.Contains(svc.Finalizers, Finalizer) {
		return nil
	}
	return c.patchFinalizers(svc, append(slices.Clone(svc.Finalizers), Finalizer))
}

// patchFinalizers sets svc's finalizers to want (and svc's copy with it),
// writing only when they differ.
func (c *Controller) patchFinalizers(svc *v1.Service, want []string) error {
	if slices.Equal(svc.Finalizers, want) {
		return nil
	}
	updated := svc.DeepCopy()
	updated.Finalizers = want
	if _, err := servicehelper.PatchService(c.client.CoreV1(), svc, updated); err != nil {
		return err
	}
	svc.Finalizers = want
	return nil
}

// patchStatus writes status.loadBalancer when it differs. A Service that
// is gone needs no status.
func (c *Controller) patchStatus(svc *v1.Service, status *v1.LoadBalancerStatus) error {
	if servicehelper.LoadBalancerStatusEqual(&svc.Status.LoadBalancer, status) {
		return nil
	}
	updated := svc.DeepCopy()
	updated.Status.LoadBalancer = *status
	if _, err := servicehelper.PatchService(c.client.CoreV1(), svc, updated); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("update load balancer status: %w", err)
	}
	svc.Status.LoadBalancer = *status
	return nil
}

package outofservice

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/groundcloud/groundcloud/internal/bmc"
	"github.com/groundcloud/groundcloud/internal/config"
	"github.com/groundcloud/groundcloud/internal/inventory"
)

// ControllerName is the controller's name in --controllers.
const ControllerName = "bmc-out-of-service-controller"

// SyncInterval is how often every Node is looked at. The BMC poller's
// cache is read each time; no BMC is asked.
const SyncInterval = 2 * time.Second

// PowerStatus is what the controller reads of the BMC poller.
type PowerStatus interface {
	Status(machine string) (bmc.Status, bool)
}

// Controller taints and untaints Nodes; see the package doc.
type Controller struct {
	client  kubernetes.Interface
	nodes   corelisters.NodeLister
	synced  func() bool
	config  func() *config.Config
	power   PowerStatus
	events  record.EventRecorder
	bcast   record.EventBroadcaster
	now     func() time.Time
	applied map[string]bool // Nodes with our marked taint, for the gauge
}

// EventComponent is the source of the controller's Events.
const EventComponent = "groundcloud-bmc-out-of-service"

// New returns a controller over the shared Node informer's cache, the
// cloud-config and the BMC poller's cache; it does nothing until Run.
func New(client kubernetes.Interface, nodes corelisters.NodeLister, synced func() bool,
	current func() *config.Config, power PowerStatus) *Controller {
	b := record.NewBroadcaster()
	return &Controller{client: client, nodes: nodes, synced: synced, config: current, power: power,
		bcast: b, events: b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: EventComponent}),
		now: time.Now, applied: map[string]bool{}}
}

// Run looks at every Node each SyncInterval until ctx is done.
func (c *Controller) Run(ctx context.Context) {
	c.bcast.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.client.CoreV1().Events("")})
	defer c.bcast.Shutdown()
	t := time.NewTicker(SyncInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if c.synced() {
			c.SyncAll(ctx)
		}
	}
}

// SyncAll decides and acts for every Node in the cache.
func (c *Controller) SyncAll(ctx context.Context) {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		klog.FromContext(ctx).Error(err, "Cannot list Nodes")
		return
	}
	cfg := c.config()
	seen := map[string]bool{}
	for _, n := range nodes {
		seen[n.Name] = true
		c.sync(ctx, cfg, n)
	}
	for name := range c.applied {
		if !seen[name] {
			delete(c.applied, name)
		}
	}
	tainted.Set(float64(len(c.applied)))
}

func (c *Controller) sync(ctx context.Context, cfg *config.Config, n *corev1.Node) {
	c.reportBMC(ctx, cfg, n)
	o := c.observe(cfg, n)
	c.applied[n.Name] = o.Tainted && o.Marked
	d := Decide(o)
	if d.Action == None {
		return
	}
	logger := klog.FromContext(ctx).WithValues("node", klog.KObj(n), "action", d.Action.String(),
		"powerState", o.Status.Answer.PowerState, "offSince", o.Status.OffSince, "answeredAt", o.Status.AnsweredAt,
		"ready", readyWord(o.Ready), "grace", o.Grace)
	if err := c.write(ctx, n, d.Action); err != nil {
		actions.WithLabelValues(d.Action.String(), "error").Inc()
		logger.Error(err, "Cannot update the Node's out-of-service taint", "why", d.Why)
		return
	}
	actions.WithLabelValues(d.Action.String(), "success").Inc()
	logger.Info("Updated the Node's out-of-service taint", "why", d.Why)
	switch d.Action {
	case Apply:
		c.applied[n.Name] = true
		c.events.Eventf(n, corev1.EventTypeNormal, "OutOfServiceTaintApplied",
			"Applied %s=%s:%s: %s", Taint.Key, Taint.Value, Taint.Effect, d.Why)
	case Remove:
		c.applied[n.Name] = false
		c.events.Eventf(n, corev1.EventTypeNormal, "OutOfServiceTaintRemoved",
			"Removed %s: %s", Taint.Key, d.Why)
	}
}

// observe gathers what Decide needs about n.
func (c *Controller) observe(cfg *config.Config, n *corev1.Node) Observation {
	o := Observation{Grace: cfg.Global.BMCOutOfServiceGrace, Now: c.now()}
	// The machine as the provider finds it: by provider ID, then by name.
	m := inventory.Lookup(cfg, n).Machine
	o.Mode = cfg.OutOfServiceOf(m)
	if m != nil && m.BMC != nil {
		s, ok := c.power.Status(m.Name)
		o.Status, o.HasStatus = s, ok && s.BMC == *m.BMC
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			o.Ready = cond.Status
		}
	}
	o.Tainted = slices.ContainsFunc(n.Spec.Taints, isOutOfService)
	_, o.Marked = n.Annotations[MarkAnnotation]
	return o
}

func isOutOfService(t corev1.Taint) bool { return t.Key == corev1.TaintNodeOutOfService }

// write applies a to a fresh copy of the Node; a conflict is retried at
// the next sync.
func (c *Controller) write(ctx context.Context, cached *corev1.Node, a Action) error {
	n := cached.DeepCopy()
	switch a {
	case Apply:
		n.Spec.Taints = append(slices.DeleteFunc(n.Spec.Taints, isOutOfService), Taint)
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[MarkAnnotation] = c.now().UTC().Format(time.RFC3339)
	case Remove:
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, isOutOfService)
		delete(n.Annotations, MarkAnnotation)
	case Forget:
		delete(n.Annotations, MarkAnnotation)
	}
	if _, err := c.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update node %s: %w", n.Name, err)
	}
	return nil
}

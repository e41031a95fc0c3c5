package outofservice

import (
	"context"
	"fmt"
	"slices"
	"sync"
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

// Fencer powers a machine off through its BMC; bmc.Redfish is the real
// one.
type Fencer interface {
	PowerOff(ctx context.Context, b *config.BMC) error
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
	fencer  Fencer
	// fenced is when each Node's machine was last powered off (started);
	// only the sync loop reads and writes it.
	fenced map[string]time.Time
	// fences are the power-offs under way, each in a goroutine of its
	// own (a BMC may take its whole timeout to answer).
	fences sync.WaitGroup
}

// EventComponent is the source of the controller's Events.
const EventComponent = "groundcloud-bmc-out-of-service"

// New returns a controller over the shared Node informer's cache, the
// cloud-config and the BMC poller's cache; it does nothing until Run.
func New(client kubernetes.Interface, nodes corelisters.NodeLister, synced func() bool,
	current func() *config.Config, power PowerStatus, fencer Fencer) *Controller {
	b := record.NewBroadcaster()
	return &Controller{client: client, nodes: nodes, synced: synced, config: current, power: power, fencer: fencer,
		bcast: b, events: b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: EventComponent}),
		now: time.Now, applied: map[string]bool{}, fenced: map[string]time.Time{}}
}

// Run looks at every Node each SyncInterval until ctx is done.
func (c *Controller) Run(ctx context.Context) {
	c.bcast.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.client.CoreV1().Events("")})
	defer c.bcast.Shutdown()
	defer c.fences.Wait()
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
	for name := range c.fenced {
		if !seen[name] {
			delete(c.fenced, name)
		}
	}
	tainted.Set(float64(len(c.applied)))
}

func (c *Controller) sync(ctx context.Context, cfg *config.Config, n *corev1.Node) {
	c.reportBMC(ctx, cfg, n)
	o, m := c.observe(cfg, n)
	c.reportMetadata(ctx, cfg, n, m)
	c.applied[n.Name] = o.Tainted && o.Marked
	if o.Marked && reapable(n, o.Now) {
		c.reap(ctx, n)
	}
	d := Decide(o)
	if d.Action == None {
		return
	}
	logger := klog.FromContext(ctx).WithValues("node", klog.KObj(n), "action", d.Action.String(),
		"powerState", o.Status.Answer.PowerState, "offSince", o.Status.OffSince, "answeredAt", o.Status.AnsweredAt,
		"ready", readyWord(o.Ready), "grace", o.Grace)
	if d.Action == Fence {
		c.fence(ctx, logger, n, m, d.Why)
		return
	}
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

// fence powers m, n's machine (Decide has seen its BMC), off through its
// BMC, in a goroutine of its own: a Warning Event says so first, with the
// evidence; then an Event says whether the BMC accepted it. The BMC's
// polls then report Off, and the Node is tainted after the grace as for
// any machine that is off.
func (c *Controller) fence(ctx context.Context, logger klog.Logger, n *corev1.Node, m *config.Machine, why string) {
	b := *m.BMC
	c.fenced[n.Name] = c.now()
	logger.Info("Powering the machine off through its BMC (fencing)", "machine", m.Name, "why", why)
	c.events.Eventf(n, corev1.EventTypeWarning, "Fencing", "Powering off machine %s through its BMC (ForceOff): %s", m.Name, why)
	node := n.DeepCopy()
	c.fences.Go(func() {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.Timeout)
		defer cancel()
		if err := c.fencer.PowerOff(fctx, &b); err != nil {
			actions.WithLabelValues(Fence.String(), "error").Inc()
			logger.Error(err, "The BMC did not power the machine off; trying again after bmc-fence-after", "machine", m.Name)
			c.events.Eventf(node, corev1.EventTypeWarning, "FenceFailed", "Machine %s was not powered off: %v. Tried again after bmc-fence-after", m.Name, err)
			return
		}
		actions.WithLabelValues(Fence.String(), "success").Inc()
		logger.Info("The BMC accepted the power-off", "machine", m.Name)
		c.events.Eventf(node, corev1.EventTypeNormal, "Fenced", "The BMC of machine %s accepted ForceOff; the Node is tainted out of service once it has said Off for the grace", m.Name)
	})
}

// observe gathers what Decide needs about n, and returns n's machine (nil
// when the cloud-config has none).
func (c *Controller) observe(cfg *config.Config, n *corev1.Node) (Observation, *config.Machine) {
	o := Observation{Grace: cfg.Global.BMCOutOfServiceGrace, FenceAfter: cfg.Global.BMCFenceAfter, Now: c.now(), LastFenced: c.fenced[n.Name]}
	// The machine as the provider finds it: by provider ID, then by name.
	m := inventory.Lookup(cfg, n).Machine
	o.Mode = cfg.OutOfServiceOf(m)
	o.Fence = cfg.FenceOf(m)
	if m != nil && m.BMC != nil {
		s, ok := c.power.Status(m.Name)
		o.Status, o.HasStatus = s, ok && s.BMC == *m.BMC
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			o.Ready = cond.Status
			if cond.Status != corev1.ConditionTrue {
				o.NotReadySince = cond.LastTransitionTime.Time
			}
		}
	}
	o.Tainted = slices.ContainsFunc(n.Spec.Taints, isOutOfService)
	_, o.Marked = n.Annotations[MarkAnnotation]
	return o, m
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

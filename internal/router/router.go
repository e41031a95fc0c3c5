package router

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/async"
	"github.com/groundcloud/groundcloud/internal/routeapi"
)

// Table is the kernel's routing table as a router sees it: only routes of
// its own protocol. *NetlinkTable implements it.
type Table interface {
	List() ([]Installed, error)
	// Apply carries out a plan and returns the error of each destination
	// that failed, nil if none did.
	Apply(Plan) map[netip.Prefix]error
}

// Config is what a Router needs; every field but NodeName is required
// (NodeName is required for PlacementNode).
type Config struct {
	Host      string // name in Route status
	Placement Placement
	NodeName  string // this host's Node, whose routes it does not program
	Dynamic   dynamic.Interface
	Table     Table
	MinSync   time.Duration // at most one sync per MinSync
	MaxSync   time.Duration // a full check (re-asserting the kernel's routes) at least every MaxSync
}

// Router keeps one host's kernel routes in line with the Route objects.
type Router struct {
	cfg      Config
	client   *routeapi.Client
	informer cache.SharedIndexInformer
	runner   *async.Runner
	nodeCond *corev1.NodeCondition // last written on this host's Node (PlacementNode)
}

// New builds a router; it starts nothing.
func New(cfg Config) *Router {
	r := &Router{cfg: cfg, client: routeapi.NewClient(cfg.Dynamic)}
	r.informer = routeapi.NewInformer(cfg.Dynamic, 0)
	r.runner = async.NewRunner(r.sync, cfg.MinSync, cfg.MaxSync)
	return r
}

// Run serves until ctx ends. The kernel's routes stay when it returns.
func (r *Router) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	if _, err := r.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { r.runner.Request() },
		UpdateFunc: r.onUpdate,
		DeleteFunc: func(any) { r.runner.Request() },
	}); err != nil {
		return err
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { r.informer.RunWithContext(ctx) })
	logger.Info("Waiting for Routes")
	if !cache.WaitForCacheSync(ctx.Done(), r.informer.HasSynced) {
		return nil // stopped before the first list: nothing was changed
	}
	if w, ok := r.cfg.Table.(Watcher); ok {
		// A route the kernel dropped (its link went down and came back) or
		// someone deleted comes back at once, not at the next full check.
		if err := w.Watch(ctx, r.runner.Request); err != nil {
			logger.Error(err, "Cannot watch the kernel's routes; only full checks (--max-sync-interval) put lost routes back")
		}
	}
	logger.Info("Router running", "placement", r.cfg.Placement, "node", r.cfg.NodeName)
	r.runner.Run(ctx)
	logger.Info("Router stopped; routes stay in the kernel")
	return nil
}

// nodeRetry is how soon a failed write of the Node's condition is retried.
const nodeRetry = 5 * time.Second

// onUpdate ignores updates that leave the spec alone: status writes (ours
// among them) and resyncs.
func (r *Router) onUpdate(old, cur any) {
	o, ok1 := old.(metav1.Object)
	c, ok2 := cur.(metav1.Object)
	if ok1 && ok2 && o.GetGeneration() == c.GetGeneration() {
		return
	}
	r.runner.Request()
}

// sync is one pass: select, diff against the kernel, apply, report.
func (r *Router) sync(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	objs, err := r.cached()
	if err != nil {
		return err
	}
	wants, problems := Select(objs, r.cfg.Placement, r.cfg.NodeName)
	have, err := r.cfg.Table.List()
	if err != nil {
		return err
	}
	plan := Diff(wants, have)
	var failed map[netip.Prefix]error
	if !plan.Empty() {
		logPlan(logger, plan)
		failed = r.cfg.Table.Apply(plan)
	}
	reports := map[string]report{}
	for _, w := range wants {
		reports[w.Name] = outcome(w, failed[w.Dst])
	}
	for _, p := range problems {
		reports[p.Name] = report{Reason: p.Reason, Message: p.Message}
	}
	// The Node's condition first: load balancers that wait for it send this
	// node no traffic until it is written, and the Route statuses are a
	// write per Route, seconds of them for a node joining a cluster of a
	// hundred (the client's rate limit).
	if r.cfg.Placement == PlacementNode {
		c := podRoutes(wants, failed)
		if c.Status != corev1.ConditionTrue && !sameCondition(r.nodeCond, &c) {
			logger.Info("Pod routes not all programmed; load balancers that wait for them (cloud-config [Routes] node-routers) leave this Node out until they are", "message", c.Message)
		}
		// A Node whose load balancers wait for this condition gets no
		// traffic until it is written: a failed write is retried soon,
		// not only at the next full check.
		if err := r.reportNode(ctx, c); err != nil {
			logger.Error(err, "Cannot report this Node's pod routes; retrying", "after", nodeRetry)
			time.AfterFunc(nodeRetry, r.runner.Request)
		}
	}
	r.report(ctx, objs, reports)
	// Failures are reported per Route and retried at the next full check;
	// they do not make the runner retry at once.
	return nil
}

func outcome(w Want, err error) report {
	switch {
	case err == nil:
		return report{Programmed: true, Reason: ReasonProgrammed, Message: fmt.Sprintf("%s via %s", w.Dst, w.Via)}
	case errors.Is(err, ErrForeignRoute):
		return report{Reason: ReasonConflict, Message: err.Error()}
	default:
		return report{Reason: ReasonFailed, Message: err.Error()}
	}
}

func logPlan(logger klog.Logger, p Plan) {
	for _, d := range p.Delete {
		logger.Info("Deleting route", "destination", d.Dst, "via", d.Via)
	}
	for _, c := range p.Replace {
		logger.Info("Replacing route", "destination", c.New.Dst, "via", c.New.Via, "oldVia", c.Old.Via, "route", c.New.Name)
	}
	for _, a := range p.Add {
		logger.Info("Adding route", "destination", a.Dst, "via", a.Via, "route", a.Name)
	}
}

func (r *Router) cached() ([]*v1alpha1.Route, error) {
	var out []*v1alpha1.Route
	for _, obj := range r.informer.GetStore().List() {
		rt, err := routeapi.Type.FromUnstructured(obj)
		if err != nil {
			return nil, err
		}
		out = append(out, rt)
	}
	return out, nil
}

// report writes this host's status entry of each Route where it changed.
func (r *Router) report(ctx context.Context, objs []*v1alpha1.Route, reports map[string]report) {
	logger := klog.FromContext(ctx)
	now := metav1.Now()
	for _, obj := range objs {
		rep, ok := reports[obj.Name]
		if !ok {
			continue
		}
		st, changed := hostStatus(obj, r.cfg.Host, rep, now)
		if !changed {
			continue
		}
		if !rep.Programmed {
			logger.Info("Route not programmed", "route", obj.Name, "reason", rep.Reason, "message", rep.Message)
		}
		if err := r.client.ApplyHostStatus(ctx, obj.Name, FieldManager(r.cfg.Host), st); err != nil {
			logger.Error(err, "Cannot write Route status", "route", obj.Name)
		}
	}
}

// FieldManager is the server-side-apply manager of one host's status entry.
func FieldManager(host string) string { return "groundcloud-router/" + host }

package addresspools

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
)

// Resource is the AddressPool resource.
var Resource = v1alpha1.SchemeGroupVersion.WithResource("addresspools")

const (
	// DefaultInterval is the least time between two syncs: a burst of
	// allocations is written once.
	DefaultInterval = time.Second
	// resync is how often the stored objects are read again, which puts
	// back one deleted or changed by hand.
	resync = time.Minute
)

// Reporter writes the AddressPool objects.
type Reporter struct {
	res      dynamic.NamespaceableResourceInterface
	snapshot func() Snapshot
	wake     chan struct{}
	interval time.Duration
	fieldMgr string

	stored map[string]*v1alpha1.AddressPool // nil: read them first
}

// NewReporter returns a Reporter that writes what snapshot returns, with
// fieldManager in managedFields. It starts nothing: call Run.
func NewReporter(dyn dynamic.Interface, fieldManager string, snapshot func() Snapshot) *Reporter {
	return &Reporter{
		res: dyn.Resource(Resource), snapshot: snapshot, wake: make(chan struct{}, 1),
		interval: DefaultInterval, fieldMgr: fieldManager,
	}
}

// Due asks for a sync; it never blocks.
func (r *Reporter) Due() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run syncs once, then whenever Due was called (at most once per
// interval) and every minute, until ctx ends.
func (r *Reporter) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	tick := time.NewTicker(resync)
	defer tick.Stop()
	r.Due()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-tick.C:
			r.stored = nil
		}
		if err := r.sync(ctx); err != nil {
			logger.Error(err, "Cannot write AddressPools; retrying")
			r.stored = nil
			r.Due()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(r.interval):
		}
	}
}

// sync makes the stored objects the desired ones.
func (r *Reporter) sync(ctx context.Context) error {
	if r.stored == nil {
		if err := r.read(ctx); err != nil {
			return err
		}
	}
	w := Plan(Desired(r.snapshot()), r.stored)
	if w.Empty() {
		return nil
	}
	logger := klog.FromContext(ctx)
	var errs []error
	for _, ap := range w.Create {
		logger.V(2).Info("Creating AddressPool", "pool", ap.Name)
		errs = append(errs, r.write(ctx, ap, true))
	}
	for _, ap := range w.Update {
		logger.V(2).Info("Updating AddressPool", "pool", ap.Name)
		errs = append(errs, r.write(ctx, ap, false))
	}
	for _, name := range w.Delete {
		logger.Info("Deleting AddressPool: its pool is gone from the cloud-config", "pool", name)
		err := r.res.Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete AddressPool %s: %w", name, err))
			continue
		}
		delete(r.stored, name)
	}
	return errors.Join(errs...)
}

// read fills stored from the apiserver.
func (r *Reporter) read(ctx context.Context) error {
	list, err := r.res.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list AddressPools: %w", err)
	}
	r.stored = make(map[string]*v1alpha1.AddressPool, len(list.Items))
	for i := range list.Items {
		ap, err := fromUnstructured(&list.Items[i])
		if err != nil {
			return err
		}
		r.stored[ap.Name] = ap
	}
	return nil
}

// write creates or updates ap and remembers what was stored.
func (r *Reporter) write(ctx context.Context, ap *v1alpha1.AddressPool, create bool) error {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ap)
	if err != nil {
		return fmt.Errorf("convert AddressPool %s: %w", ap.Name, err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(v1alpha1.SchemeGroupVersion.String())
	u.SetKind("AddressPool")
	var out *unstructured.Unstructured
	if create {
		out, err = r.res.Create(ctx, u, metav1.CreateOptions{FieldManager: r.fieldMgr})
	} else {
		out, err = r.res.Update(ctx, u, metav1.UpdateOptions{FieldManager: r.fieldMgr})
	}
	if err != nil {
		return fmt.Errorf("write AddressPool %s: %w", ap.Name, err)
	}
	stored, err := fromUnstructured(out)
	if err != nil {
		return err
	}
	r.stored[ap.Name] = stored
	return nil
}

func fromUnstructured(u *unstructured.Unstructured) (*v1alpha1.AddressPool, error) {
	ap := &v1alpha1.AddressPool{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ap); err != nil {
		return nil, fmt.Errorf("read AddressPool %s: %w", u.GetName(), err)
	}
	return ap, nil
}

package addresspools

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/crdclient"
)

// Resource is the AddressPool resource.
var Resource = v1alpha1.SchemeGroupVersion.WithResource("addresspools")

// Type is the AddressPool for crdclient.
var Type = crdclient.ClusterScoped[v1alpha1.AddressPool](Resource, "AddressPool")

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
	client   *crdclient.Client[*v1alpha1.AddressPool]
	snapshot func() Snapshot
	wake     chan struct{}
	interval time.Duration

	stored map[string]*v1alpha1.AddressPool // nil: read them first
}

// NewReporter returns a Reporter that writes what snapshot returns, with
// fieldManager in managedFields. It starts nothing: call Run.
func NewReporter(dyn dynamic.Interface, fieldManager string, snapshot func() Snapshot) *Reporter {
	return &Reporter{
		client: crdclient.New(dyn, Type, fieldManager), snapshot: snapshot,
		wake: make(chan struct{}, 1), interval: DefaultInterval,
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
		err := r.client.Delete(ctx, "", name, metav1.DeleteOptions{})
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
	aps, err := r.client.List(ctx)
	if err != nil {
		return fmt.Errorf("list AddressPools: %w", err)
	}
	r.stored = make(map[string]*v1alpha1.AddressPool, len(aps))
	for _, ap := range aps {
		r.stored[ap.Name] = ap
	}
	return nil
}

// write creates or updates ap and remembers what was stored.
func (r *Reporter) write(ctx context.Context, ap *v1alpha1.AddressPool, create bool) error {
	send := r.client.Update
	if create {
		send = r.client.Create
	}
	stored, err := send(ctx, ap)
	if err != nil {
		return fmt.Errorf("write AddressPool %s: %w", ap.Name, err)
	}
	r.stored[ap.Name] = stored
	return nil
}

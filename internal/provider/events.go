package provider

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/groundcloud/groundcloud/internal/loadbalancers"
)

// serviceEvents returns the recorder of the load-balancer manager's Events
// on Services (component groundcloud-controller-manager), stopped when ctx
// ends; nil, and no Events, when it has no client.
func serviceEvents(ctx context.Context, clients cloudprovider.ControllerClientBuilder) loadbalancers.EventRecorder {
	cs, err := kubernetes.NewForConfig(clients.ConfigOrDie(loadbalancers.FieldManager))
	if err != nil {
		klog.FromContext(ctx).Error(err, "Cannot create a client for Events; load-balancer Events are not recorded")
		return nil
	}
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	context.AfterFunc(ctx, b.Shutdown)
	return b.NewRecorder(scheme.Scheme, v1.EventSource{Component: loadbalancers.FieldManager})
}

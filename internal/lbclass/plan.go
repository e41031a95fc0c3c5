package lbclass

import (
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/cloud-provider/api"
	servicehelper "k8s.io/cloud-provider/service/helpers"
)

const (
	// Class is the spec.loadBalancerClass groundcloud serves.
	Class = "groundcloud.io/load-balancer"
	// Finalizer keeps a Service of Class until its load balancer is
	// deleted; upstream's service.kubernetes.io/load-balancer-cleanup plays
	// that part for Services without a class.
	Finalizer = "groundcloud.io/load-balancer-cleanup"
	// ControllerName is the controller's name in --controllers.
	ControllerName = "service-lb-class-controller"
)

// handoverRetry is how long the provider asks a controller to wait while
// the other one releases a Service.
const handoverRetry = 5 * time.Second

// Served reports whether svc asks for a load balancer of Class.
func Served(svc *v1.Service) bool {
	return svc.Spec.Type == v1.ServiceTypeLoadBalancer && svc.Spec.LoadBalancerClass != nil && *svc.Spec.LoadBalancerClass == Class
}

// action is what the controller does for a Service.
type action int

const (
	actionNone    action = iota // not ours: never touched
	actionEnsure                // add the finalizer, ensure, write the status
	actionCleanup               // delete, clear the status, remove the finalizer
)

func (a action) String() string {
	return [...]string{"none", "ensure", "cleanup"}[a]
}

// plan decides what to do for svc as it is now: ensure a Service of Class
// that is not being deleted; clean up one that carries the finalizer but is
// being deleted or no longer asks for Class (its type changed); leave every
// other Service alone.
func plan(svc *v1.Service) action {
	switch {
	case Served(svc) && svc.DeletionTimestamp == nil:
		return actionEnsure
	case slices.Contains(svc.Finalizers, Finalizer):
		return actionCleanup
	}
	return actionNone
}

// relevant reports whether the controller has anything to do with svc.
func relevant(svc *v1.Service) bool {
	return plan(svc) != actionNone
}

// needsSync reports whether an update from old to cur can change what the
// controller does or writes. Status-only updates (its own writes among
// them) are ignored, except one that clears the addresses of a Service it
// serves: the other controller's last status write, racing a handover.
func needsSync(old, cur *v1.Service) bool {
	if !relevant(old) && !relevant(cur) {
		return false
	}
	if old.UID != cur.UID || !equality.Semantic.DeepEqual(old.Spec, cur.Spec) ||
		!equality.Semantic.DeepEqual(old.Annotations, cur.Annotations) ||
		!equality.Semantic.DeepEqual(old.DeletionTimestamp, cur.DeletionTimestamp) ||
		!slices.Equal(otherFinalizers(old), otherFinalizers(cur)) {
		return true
	}
	return Served(cur) && len(cur.Status.LoadBalancer.Ingress) == 0 && len(old.Status.LoadBalancer.Ingress) > 0
}

// otherFinalizers are svc's finalizers but ours: adding ours is no change.
func otherFinalizers(svc *v1.Service) []string {
	return slices.DeleteFunc(slices.Clone(svc.Finalizers), func(f string) bool { return f == Finalizer })
}

// Handover returns a RetryError while svc still carries the finalizer of
// the controller that served it before its class changed, and nil
// otherwise. The provider calls it before it ensures a load balancer, so
// that a Service moved between the upstream service controller (no class)
// and this one (Class) is released by the old owner, addresses and object,
// before the new one assigns anything: both key the Service by namespace
// and name.
func Handover(svc *v1.Service) error {
	switch {
	case Served(svc) && servicehelper.HasLBFinalizer(svc):
		return api.NewRetryError("the service controller still holds this Service's load balancer from before its class changed "+
			"(finalizer "+servicehelper.LoadBalancerCleanupFinalizer+"); it is served once that controller has released it", handoverRetry)
	case svc.Spec.LoadBalancerClass == nil && slices.Contains(svc.Finalizers, Finalizer):
		return api.NewRetryError("the "+Class+" controller still holds this Service's load balancer from before its class changed "+
			"(finalizer "+Finalizer+"); it is served once that controller has released it", handoverRetry)
	}
	return nil
}

package lbclass

import (
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cloud-provider/api"
	servicehelper "k8s.io/cloud-provider/service/helpers"
)

func newService(name string, mods ...func(*v1.Service)) *v1.Service {
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Spec: v1.ServiceSpec{
			Type:  v1.ServiceTypeLoadBalancer,
			Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080}},
		},
	}
	for _, m := range mods {
		m(s)
	}
	return s
}

func withClass(c string) func(*v1.Service) {
	return func(s *v1.Service) { s.Spec.LoadBalancerClass = &c }
}

func withFinalizers(f ...string) func(*v1.Service) {
	return func(s *v1.Service) { s.Finalizers = append(s.Finalizers, f...) }
}

func withType(t v1.ServiceType) func(*v1.Service) {
	return func(s *v1.Service) { s.Spec.Type = t }
}

func deleting(s *v1.Service) {
	now := metav1.Now()
	s.DeletionTimestamp = &now
}

func withIngress(ip string) func(*v1.Service) {
	return func(s *v1.Service) {
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, v1.LoadBalancerIngress{IP: ip})
	}
}

func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		name string
		svc  *v1.Service
		want action
	}{
		{"no class", newService("a"), actionNone},
		{"no class with upstream's finalizer", newService("a", withFinalizers(servicehelper.LoadBalancerCleanupFinalizer)), actionNone},
		{"foreign class", newService("a", withClass("example.com/other")), actionNone},
		{"foreign class being deleted", newService("a", withClass("example.com/other"), deleting), actionNone},
		{"our class", newService("a", withClass(Class)), actionEnsure},
		{"our class with our finalizer", newService("a", withClass(Class), withFinalizers(Finalizer)), actionEnsure},
		{"our class being deleted", newService("a", withClass(Class), withFinalizers(Finalizer), deleting), actionCleanup},
		{"our class being deleted, finalizer gone", newService("a", withClass(Class), deleting), actionNone},
		{"type changed to ClusterIP", newService("a", withType(v1.ServiceTypeClusterIP), withFinalizers(Finalizer)), actionCleanup},
		{"class changed to none", newService("a", withFinalizers(Finalizer)), actionCleanup},
		{"class changed to foreign", newService("a", withClass("example.com/other"), withFinalizers(Finalizer)), actionCleanup},
		{"NodePort of our class", newService("a", withType(v1.ServiceTypeNodePort)), actionNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := plan(tc.svc); got != tc.want {
				t.Errorf("plan = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNeedsSync(t *testing.T) {
	ours := newService("a", withClass(Class))
	for _, tc := range []struct {
		name     string
		old, cur *v1.Service
		want     bool
	}{
		{"foreign class edited", newService("a", withClass("x/y")), newService("a", withClass("x/y"), withType(v1.ServiceTypeClusterIP)), false},
		{"no class edited", newService("a"), newService("a", func(s *v1.Service) { s.Spec.Ports[0].Port = 81 }), false},
		{"ours: port changed", ours, newService("a", withClass(Class), func(s *v1.Service) { s.Spec.Ports[0].Port = 81 }), true},
		{"ours: our finalizer added", ours, newService("a", withClass(Class), withFinalizers(Finalizer)), false},
		{"ours: upstream's finalizer removed", newService("a", withClass(Class), withFinalizers(servicehelper.LoadBalancerCleanupFinalizer)), ours, true},
		{"ours: status written", ours, newService("a", withClass(Class), withIngress("192.0.2.1")), false},
		{"ours: status cleared by someone", newService("a", withClass(Class), withIngress("192.0.2.1")), ours, true},
		{"ours: deletion starts", newService("a", withClass(Class), withFinalizers(Finalizer)), newService("a", withClass(Class), withFinalizers(Finalizer), deleting), true},
		{"ours: type changed", newService("a", withClass(Class), withFinalizers(Finalizer)), newService("a", withType(v1.ServiceTypeClusterIP), withFinalizers(Finalizer)), true},
		{"ours: annotation", ours, newService("a", withClass(Class), func(s *v1.Service) { s.Annotations = map[string]string{"k": "v"} }), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := needsSync(tc.old, tc.cur); got != tc.want {
				t.Errorf("needsSync = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestHandover(t *testing.T) {
	for _, tc := range []struct {
		name  string
		svc   *v1.Service
		retry bool
	}{
		{"no class", newService("a"), false},
		{"our class", newService("a", withClass(Class), withFinalizers(Finalizer)), false},
		{"no class, upstream's finalizer", newService("a", withFinalizers(servicehelper.LoadBalancerCleanupFinalizer)), false},
		{"our class, upstream's finalizer still on", newService("a", withClass(Class), withFinalizers(Finalizer, servicehelper.LoadBalancerCleanupFinalizer)), true},
		{"no class, our finalizer still on", newService("a", withFinalizers(servicehelper.LoadBalancerCleanupFinalizer, Finalizer)), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Handover(tc.svc)
			var retry *api.RetryError
			if got := errors.As(err, &retry); got != tc.retry {
				t.Errorf("Handover = %v, want a RetryError: %v", err, tc.retry)
			}
		})
	}
}

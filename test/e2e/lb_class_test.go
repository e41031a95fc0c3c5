package e2e

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	servicehelper "k8s.io/cloud-provider/service/helpers"

	"github.com/groundcloud/groundcloud/internal/lbapi"
	"github.com/groundcloud/groundcloud/internal/lbclass"
	"github.com/groundcloud/groundcloud/test/framework/apionly"
)

const foreignClass = "example.com/other-load-balancer"

func withClass(class string) func(*v1.Service) {
	return func(s *v1.Service) { s.Spec.LoadBalancerClass = &class }
}

const usedIPv4 = `groundcloud_pool_addresses{family="IPv4",kind="used",pool="default"}`

// TestLoadBalancerClass: with the default flags, Services without a class
// (the upstream service controller) and of class groundcloud.io/load-balancer
// (ours) are served from the same pools, and a Service of another class is
// never touched. The class Service carries our finalizer, not upstream's,
// gets its address, its LoadBalancer object and traffic; deleting it frees
// the address and lets the Service go. A Service moved from the class to
// no class (through ClusterIP, as the API requires) is released by our
// controller before upstream's serves it.
func TestLoadBalancerClass(t *testing.T) {
	env := startLBEnv(t)
	env.create(t, newService("foreign", withClass(foreignClass), withPort(v1.ProtocolTCP, 80, env.nodePort(t))))
	env.create(t, newService("ours", withClass(lbclass.Class), withPort(v1.ProtocolTCP, 80, env.nodePort(t))))
	vip := env.addresses(t, "ours", 1)[0]
	env.create(t, newService("plain", withPort(v1.ProtocolTCP, 80, env.nodePort(t))))
	plainVIP := env.addresses(t, "plain", 1)[0]
	if vip == plainVIP {
		t.Fatalf("ours and plain share %s", vip)
	}

	env.wantFinalizers(t, "ours", lbclass.Finalizer)
	env.wantFinalizers(t, "plain", servicehelper.LoadBalancerCleanupFinalizer)
	if lb := env.loadBalancer(t, "ours"); !slices.Equal(lb.Spec.Addresses, []string{vip.String()}) {
		t.Errorf("LoadBalancer ours has addresses %v, want [%s]", lb.Spec.Addresses, vip)
	}
	env.nodesReached(t, netip.AddrPortFrom(vip, 80), env.nodeNames()...)
	env.untouched(t, "foreign")
	eventually(t, "2 IPv4 addresses used", func() bool { v, _ := env.ccmMetric(t, usedIPv4); return v == 2 })

	// Deleting frees the address: the next Service of the class gets it.
	env.delete(t, "ours")
	env.gone(t, "ours")
	eventually(t, "1 IPv4 address used", func() bool { v, _ := env.ccmMetric(t, usedIPv4); return v == 1 })
	env.create(t, newService("again", withClass(lbclass.Class), withPort(v1.ProtocolTCP, 80, env.nodePort(t))))
	if got := env.addresses(t, "again", 1)[0]; got != vip {
		t.Errorf("again got %s, want the freed %s", got, vip)
	}

	// From the class to no class: ClusterIP first, as the API requires,
	// then LoadBalancer at once, before either controller has acted.
	// updateService reads again on a conflict: the class controller may
	// write the Service (status, finalizer) between our read and write.
	updateService(t, env, "again", func(svc *v1.Service) {
		svc.Spec.Type, svc.Spec.LoadBalancerClass = v1.ServiceTypeClusterIP, nil
	})
	updateService(t, env, "again", func(svc *v1.Service) { svc.Spec.Type = v1.ServiceTypeLoadBalancer })
	env.wantFinalizers(t, "again", servicehelper.LoadBalancerCleanupFinalizer)
	env.addresses(t, "again", 1)
	eventually(t, "LoadBalancer again written by the service controller's Ensure", func() bool {
		lb, err := lbapi.NewClient(env.dyn).Get(t.Context(), "default", "again")
		return err == nil && len(lb.Spec.Addresses) == 1
	})
	eventually(t, "2 IPv4 addresses used", func() bool { v, _ := env.ccmMetric(t, usedIPv4); return v == 2 })
	env.untouched(t, "foreign")
}

// TestLoadBalancerClassOnly: with --load-balancer-class-only, Services
// without a class are left to another load balancer (no finalizer, no
// status, no LoadBalancer, no address) as are those of another class, and
// Services of the class are served as with the default flags.
func TestLoadBalancerClassOnly(t *testing.T) {
	env := startLBEnv(t, func(o *apionly.Options) {
		o.ExtraCCMArgs = append(o.ExtraCCMArgs, "--load-balancer-class-only")
	})
	waitLog(t, env.CCMLog(), "Not starting the service controller")
	env.create(t, newService("plain", withPort(v1.ProtocolTCP, 80, env.nodePort(t))))
	env.create(t, newService("foreign", withClass(foreignClass), withPort(v1.ProtocolTCP, 80, env.nodePort(t))))
	env.create(t, newService("ours", withClass(lbclass.Class), withPort(v1.ProtocolTCP, 80, env.nodePort(t))))
	vip := env.addresses(t, "ours", 1)[0]
	if want := netip.MustParseAddr("192.0.2.200"); vip != want {
		t.Errorf("ours got %s, want the pool's first address %s: another Service took it", vip, want)
	}
	env.wantFinalizers(t, "ours", lbclass.Finalizer)
	env.nodesReached(t, netip.AddrPortFrom(vip, 80), env.nodeNames()...)
	env.untouched(t, "plain")
	env.untouched(t, "foreign")
	if v, _ := env.ccmMetric(t, usedIPv4); v != 1 {
		t.Errorf("%s = %v, want 1", usedIPv4, v)
	}

	env.delete(t, "ours")
	env.gone(t, "ours")
	eventually(t, "no IPv4 address used", func() bool { v, _ := env.ccmMetric(t, usedIPv4); return v == 0 })
	env.untouched(t, "plain")
}

func (env *lbEnv) service(t *testing.T, name string) *v1.Service {
	t.Helper()
	svc, err := env.client.CoreV1().Services("default").Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// wantFinalizers waits until the Service's finalizers are exactly want.
func (env *lbEnv) wantFinalizers(t *testing.T, name string, want ...string) {
	t.Helper()
	var got []string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("service %s finalizers as last seen: %v", name, got)
		}
	})
	eventually(t, "finalizers of "+name, func() bool {
		got = env.service(t, name).Finalizers
		return slices.Equal(got, want)
	})
}

// untouched checks that no controller of ours wrote to the Service or for
// it: no finalizer, no status, no LoadBalancer object, no Event.
func (env *lbEnv) untouched(t *testing.T, name string) {
	t.Helper()
	svc := env.service(t, name)
	if len(svc.Finalizers) > 0 || len(svc.Status.LoadBalancer.Ingress) > 0 {
		t.Errorf("service %s touched: finalizers %v, status %+v", name, svc.Finalizers, svc.Status.LoadBalancer)
	}
	if _, err := lbapi.NewClient(env.dyn).Get(t.Context(), "default", name); !apierrors.IsNotFound(err) {
		t.Errorf("LoadBalancer %s: %v, want NotFound", name, err)
	}
	evs, err := env.client.CoreV1().Events("default").List(t.Context(), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Service,involvedObject.name=" + name,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if apiserverRepair(e) {
			continue // the apiserver's own, about the ClusterIP it allocated
		}
		t.Errorf("service %s has event %s from %s: %s", name, e.Reason, e.Source.Component, e.Message)
	}
}

// apiserverRepair reports whether e is from the apiserver's ClusterIP
// repair loop, which may race a Service's creation ("ClusterIPNotAllocated
// … repairing") and says nothing about load balancers.
func apiserverRepair(e v1.Event) bool {
	return strings.Contains(e.ReportingController, "ipallocator-repair") ||
		e.Source.Component == "" && e.ReportingController == "" && strings.HasPrefix(e.Reason, "ClusterIP")
}

// gone waits until the Service and its LoadBalancer are deleted: the
// finalizer was removed after the load balancer was.
func (env *lbEnv) gone(t *testing.T, name string) {
	t.Helper()
	eventually(t, "service "+name+" gone", func() bool {
		_, err := env.client.CoreV1().Services("default").Get(t.Context(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if _, err := lbapi.NewClient(env.dyn).Get(t.Context(), "default", name); !apierrors.IsNotFound(err) {
		t.Errorf("LoadBalancer %s after its Service went: %v, want NotFound", name, err)
	}
}

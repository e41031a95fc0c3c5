package loadbalancers

import (
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/annotation"
	"github.com/groundcloud/groundcloud/internal/ipam"
)

func TestServiceStatusIPMode(t *testing.T) {
	for fwd, want := range map[string]v1.LoadBalancerIPMode{
		v1alpha1.ForwardingPassthrough: v1.LoadBalancerIPModeVIP,
		v1alpha1.ForwardingProxy:       v1.LoadBalancerIPModeProxy,
		"":                             v1.LoadBalancerIPModeProxy, // written before the field existed
	} {
		st := ServiceStatus(&v1alpha1.LoadBalancerSpec{Addresses: []string{"192.0.2.200", "2001:db8::200"}, Forwarding: fwd})
		for _, in := range st.Ingress {
			if in.IPMode == nil || *in.IPMode != want {
				t.Errorf("forwarding %q: ingress %+v, want ipMode %s", fwd, in, want)
			}
		}
	}
}

func TestEnsureForwarding(t *testing.T) {
	h := startManager(t, newFakeDynamic(), newNode("a", withAddr(v1.NodeInternalIP, "192.0.2.11")))
	st := h.mustEnsure(newSvc("web"))
	if got := h.object("web").Spec.Forwarding; got != v1alpha1.ForwardingPassthrough {
		t.Errorf("spec.forwarding = %q, want the pool's default Passthrough", got)
	}
	if *st.Ingress[0].IPMode != v1.LoadBalancerIPModeVIP {
		t.Errorf("ipMode = %s, want VIP", *st.Ingress[0].IPMode)
	}

	st = h.mustEnsure(newSvc("web", withAnnotation(annotation.Forwarding, "proxy")))
	if got := h.object("web").Spec.Forwarding; got != v1alpha1.ForwardingProxy {
		t.Errorf("spec.forwarding = %q, want Proxy from the annotation", got)
	}
	if *st.Ingress[0].IPMode != v1.LoadBalancerIPModeProxy {
		t.Errorf("ipMode = %s, want Proxy", *st.Ingress[0].IPMode)
	}
	if st, ok, _ := h.m.Get(h.ctx, newSvc("web", withAnnotation(annotation.Forwarding, "proxy"))); !ok || *st.Ingress[0].IPMode != v1.LoadBalancerIPModeProxy {
		t.Errorf("Get = %+v, want ipMode Proxy", st)
	}

	if _, err := h.ensure(newSvc("web", withAnnotation(annotation.Forwarding, "dsr"))); err == nil || !strings.Contains(err.Error(), annotation.Forwarding) {
		t.Errorf("Ensure with a bad annotation = %v, want an error naming it", err)
	}
	if got := h.object("web").Spec.Forwarding; got != v1alpha1.ForwardingPassthrough {
		t.Errorf("spec.forwarding with a bad annotation = %q, want the pool's Passthrough", got)
	}
}

func withPort(proto v1.Protocol, port, nodePort int32) func(*v1.Service) {
	return func(s *v1.Service) {
		s.Spec.Ports = []v1.ServicePort{{Name: "p", Protocol: proto, Port: port, NodePort: nodePort}}
	}
}

// TestSharedAddressForwardsOneWay: a Service that would share an address
// with a Service of another forwarding is refused (an error, for the
// service controller's Warning, and no LoadBalancer), and one that shares
// keeps its forwarding when it asks for another; the first keeps serving.
func TestSharedAddressForwardsOneWay(t *testing.T) {
	h := startManager(t, newFakeDynamic())
	h.mustEnsure(newSvc("web", withAnnotation(annotation.AllowSharedIP, "k")))

	api := newSvc("api", withAnnotation(annotation.AllowSharedIP, "k"), withAnnotation(annotation.LoadBalancerIPs, "192.0.2.200"),
		withAnnotation(annotation.Forwarding, "proxy"), withPort(v1.ProtocolTCP, 443, 30443))
	if _, err := h.ensure(api); !errors.Is(err, ipam.ErrSharingConflict) || !strings.Contains(err.Error(), annotation.Forwarding) {
		t.Fatalf("Ensure of a proxy Service on web's passthrough address = %v, want ErrSharingConflict naming %s", err, annotation.Forwarding)
	}
	if h.object("api") != nil {
		t.Error("the refused Service has a LoadBalancer")
	}
	if _, exists, _ := h.m.Get(h.ctx, api); exists {
		t.Error("Get says the refused Service has a load balancer")
	}

	dns := newSvc("dns", withAnnotation(annotation.AllowSharedIP, "k"), withAnnotation(annotation.LoadBalancerIPs, "192.0.2.200"),
		withPort(v1.ProtocolUDP, 53, 30053))
	h.mustEnsure(dns)
	withAnnotation(annotation.Forwarding, "proxy")(dns)
	if _, err := h.ensure(dns); !errors.Is(err, ipam.ErrSharingConflict) {
		t.Fatalf("Ensure of a sharer asking for proxy = %v, want ErrSharingConflict", err)
	}
	for _, name := range []string{"web", "dns"} {
		if spec := h.object(name).Spec; spec.Forwarding != v1alpha1.ForwardingPassthrough || spec.Addresses[0] != "192.0.2.200" {
			t.Errorf("%s: forwarding %q on %v, want Passthrough kept on 192.0.2.200", name, spec.Forwarding, spec.Addresses)
		}
	}
}

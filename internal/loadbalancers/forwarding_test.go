package loadbalancers

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/annotation"
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

package loadbalancers

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/annotation"
	"github.com/groundcloud/groundcloud/internal/config"
)

// Forwarding is the LoadBalancer's spec.forwarding for svc, whose
// addresses come from pool (nil: a pool the cloud-config no longer has):
// the Service's groundcloud.io/forwarding annotation if it is set, else
// the pool's forwarding key (passthrough by default). An annotation it
// cannot use is an error, and the pool's choice is returned with it.
func Forwarding(svc *v1.Service, pool *config.Pool) (string, error) {
	mode := config.ForwardingPassthrough
	if pool != nil && pool.Forwarding != "" {
		mode = pool.Forwarding
	}
	var err error
	if raw, ok := svc.Annotations[annotation.Forwarding]; ok {
		switch m := config.Forwarding(strings.ToLower(strings.TrimSpace(raw))); m {
		case config.ForwardingPassthrough, config.ForwardingProxy:
			mode = m
		default:
			err = fmt.Errorf("annotation %s: %q is not a forwarding mode; use passthrough or proxy (using %s, the pool's)",
				annotation.Forwarding, raw, mode)
		}
	}
	if mode == config.ForwardingProxy {
		return v1alpha1.ForwardingProxy, err
	}
	return v1alpha1.ForwardingPassthrough, err
}

// ipMode is the Service status ipMode of a LoadBalancer's forwarding: VIP
// when nodes receive packets addressed to the VIP (passthrough), Proxy when
// agents DNAT them (absent forwarding is Proxy).
func ipMode(forwarding string) v1.LoadBalancerIPMode {
	if forwarding == v1alpha1.ForwardingPassthrough {
		return v1.LoadBalancerIPModeVIP
	}
	return v1.LoadBalancerIPModeProxy
}

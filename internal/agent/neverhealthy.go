package agent

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/dataplane"
)

// ReasonNoHealthyBackend: no backend of the LoadBalancer has passed its
// health check since this agent first saw it, which is what a health check
// that does not fit the cluster looks like (kube-proxy's, on a cluster
// without kube-proxy).
const ReasonNoHealthyBackend = "NoHealthyBackend"

// neverServed returns the services of st that have backends, none healthy,
// and were not in served (those that have had a healthy backend), and
// served updated: every service of st with a healthy backend, and those it
// held before that are still in st.
func neverServed(st dataplane.State, served map[string]bool) ([]string, map[string]bool) {
	var never []string
	next := make(map[string]bool, len(st.Services))
	for _, svc := range st.Services {
		healthy := slices.ContainsFunc(svc.Backends, func(b dataplane.Backend) bool { return b.Healthy })
		switch {
		case healthy || served[svc.Name]:
			next[svc.Name] = true
		case len(svc.Backends) > 0:
			never = append(never, svc.Name)
		}
	}
	return never, next
}

// neverHealthyMessage says what to check for lb, none of whose backends
// has passed hc.
func neverHealthyMessage(lb *v1alpha1.LoadBalancer) string {
	hc := lb.Spec.HealthCheck
	check := "no health check"
	if hc != nil {
		check = fmt.Sprintf("HTTP GET :%d%s", hc.Port, hc.Path)
		if hc.Type == v1alpha1.HealthCheckTCP {
			check = fmt.Sprintf("TCP connection to :%d", hc.Port)
		}
	}
	msg := fmt.Sprintf("no backend has passed its health check (%s) since this host first saw the LoadBalancer: every connection is refused", check)
	if lb.Spec.ExternalTrafficPolicy == string(corev1.ServiceExternalTrafficPolicyLocal) {
		return msg + "; with externalTrafficPolicy Local only nodes with a ready Pod of the Service pass it"
	}
	return msg + "; with externalTrafficPolicy Cluster the check is the cloud-config's cluster-health-check (kube-proxy's :10256/healthz by default): " +
		"a cluster without kube-proxy must set it to its replacement's health endpoint or to tcp-node-port (docs/install.md#clusters-without-kube-proxy)"
}

// noteNeverHealthy marks each LoadBalancer no backend of which has ever
// been healthy as not programmed (reason NoHealthyBackend), and logs and
// records a Warning Event the first time. Used by sync only.
func (a *Agent) noteNeverHealthy(lbs []*v1alpha1.LoadBalancer, plan *Plan) {
	never, served := neverServed(plan.State, a.served)
	a.served = served
	warned := map[string]bool{}
	for _, name := range never {
		i := slices.IndexFunc(lbs, func(lb *v1alpha1.LoadBalancer) bool { return lb.Namespace+"/"+lb.Name == name })
		if i < 0 {
			continue
		}
		msg := neverHealthyMessage(lbs[i])
		if plan.Problems == nil {
			plan.Problems = map[string]Problems{}
		}
		bad := plan.Problems[name]
		bad.NoHealthyBackend = true
		bad.add(false, msg)
		plan.Problems[name] = bad
		warned[name] = true
		if !a.neverWarned[name] {
			klog.Background().Error(nil, "LoadBalancer has had no healthy backend", "host", a.cfg.Host, "loadBalancer", name, "problem", msg)
			if a.cfg.Events != nil {
				a.cfg.Events.Eventf(eventTarget(lbs[i]), corev1.EventTypeWarning, ReasonNoHealthyBackend, "%s", msg)
			}
		}
	}
	a.neverWarned = warned
}

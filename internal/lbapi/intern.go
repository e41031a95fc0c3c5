package lbapi

import (
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
)

// intern makes lb's strings that repeat across LoadBalancers (namespace,
// labels, annotations, owners, the enumerations of its spec, host names
// and the conditions every host writes) share one copy each: decoded,
// every object had its own, and at 5,000 LoadBalancers those copies were
// megabytes of an informer's cache. Strings unique to the object (name,
// UID, addresses) are left as they are.
func intern(lb *v1alpha1.LoadBalancer) {
	m := &lb.ObjectMeta
	in(&m.Namespace)
	m.Labels = internMap(m.Labels)
	m.Annotations = internMap(m.Annotations)
	for i := range m.Finalizers {
		in(&m.Finalizers[i])
	}
	for i := range m.OwnerReferences {
		o := &m.OwnerReferences[i]
		in(&o.APIVersion)
		in(&o.Kind)
	}

	s := &lb.Spec
	in(&s.Pool)
	in(&s.ExternalTrafficPolicy)
	in(&s.SessionAffinity)
	in(&s.Forwarding)
	for i := range s.Ports {
		in(&s.Ports[i].Name)
		in(&s.Ports[i].Protocol)
	}
	if s.HealthCheck != nil {
		in(&s.HealthCheck.Type)
		in(&s.HealthCheck.Path)
	}
	if s.Announce != nil {
		in(&s.Announce.Mode)
		in(&s.Announce.HostSelector)
		for i := range s.Announce.Communities {
			in(&s.Announce.Communities[i])
		}
	}

	st := &lb.Status
	internConditions(st.Conditions)
	for i := range st.Addresses {
		in(&st.Addresses[i].Host)
	}
	for i := range st.Hosts {
		h := &st.Hosts[i]
		in(&h.Name)
		internConditions(h.Conditions)
	}
}

func internConditions(cs []metav1.Condition) {
	for i := range cs {
		c := &cs[i]
		in(&c.Type)
		s := string(c.Status)
		in(&s)
		c.Status = metav1.ConditionStatus(s)
		in(&c.Reason)
		in(&c.Message)
	}
}

func internMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		in(&k)
		in(&v)
		out[k] = v
	}
	return out
}

// in replaces *s by its canonical copy.
func in(s *string) {
	if *s != "" {
		*s = unique.Make(*s).Value()
	}
}

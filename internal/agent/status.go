package agent

import (
	"net/netip"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/membership"
)

// Reasons of the conditions the agent writes.
const (
	ReasonSynced     = "Synced"
	ReasonSyncFailed = "SyncFailed"
	ReasonNoAddress  = "NoAddressHeld"
)

// hostReport is what one agent says about one LoadBalancer.
type hostReport struct {
	Host       string
	Programmed bool
	Message    string
	Held       []netip.Addr // the LoadBalancer's addresses this host holds
	// Member is this host's standing among several (nil: a lone agent).
	Member *membership.Status
}

// desiredStatus returns the status fields this host owns for lb, and
// whether they differ from what lb's status already says. Conditions keep
// their lastTransitionTime while their status does not change.
func desiredStatus(lb *v1alpha1.LoadBalancer, r hostReport, now metav1.Time) (v1alpha1.LoadBalancerStatus, bool) {
	gen := lb.Generation
	programmed := condition(v1alpha1.ConditionProgrammed, r.Programmed, gen, r.Message, now, hostConditions(lb, r.Host))
	conds := []metav1.Condition{programmed}
	if r.Member != nil {
		conds = append(conds, memberCondition(*r.Member, gen, now, hostConditions(lb, r.Host)))
		if r.Member.Gossip.Reason != "" {
			conds = append(conds, gossipCondition(r.Member.Gossip, gen, now, hostConditions(lb, r.Host)))
		}
	}
	st := v1alpha1.LoadBalancerStatus{
		Hosts: []v1alpha1.HostStatus{{Name: r.Host, Conditions: conds}},
	}
	for _, a := range r.Held {
		st.Addresses = append(st.Addresses, v1alpha1.AddressStatus{Address: a.String(), Host: r.Host})
	}
	if len(r.Held) > 0 {
		st.ObservedGeneration = gen
		msg := "every address is held by a host that programmed this generation"
		if !r.Programmed {
			msg = r.Message
		}
		st.Conditions = []metav1.Condition{condition(v1alpha1.ConditionReady, r.Programmed, gen, msg, now, lb.Status.Conditions)}
	}
	return st, !covers(lb.Status, st)
}

func condition(typ string, ok bool, gen int64, msg string, now metav1.Time, existing []metav1.Condition) metav1.Condition {
	c := metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: ReasonSynced, ObservedGeneration: gen, LastTransitionTime: now, Message: msg}
	if !ok {
		c.Status, c.Reason = metav1.ConditionFalse, ReasonSyncFailed
	}
	if old := meta.FindStatusCondition(existing, typ); old != nil && old.Status == c.Status {
		c.LastTransitionTime = old.LastTransitionTime
	}
	return c
}

func hostConditions(lb *v1alpha1.LoadBalancer, host string) []metav1.Condition {
	for _, h := range lb.Status.Hosts {
		if h.Name == host {
			return h.Conditions
		}
	}
	return nil
}

// covers reports whether have already contains every field of want.
func covers(have, want v1alpha1.LoadBalancerStatus) bool {
	if len(want.Conditions) > 0 && have.ObservedGeneration != want.ObservedGeneration {
		return false
	}
	for _, c := range want.Conditions {
		if !sameCondition(meta.FindStatusCondition(have.Conditions, c.Type), c) {
			return false
		}
	}
	for _, h := range want.Hosts {
		var got []metav1.Condition
		for _, hh := range have.Hosts {
			if hh.Name == h.Name {
				got = hh.Conditions
			}
		}
		for _, c := range h.Conditions {
			if !sameCondition(meta.FindStatusCondition(got, c.Type), c) {
				return false
			}
		}
	}
	for _, a := range want.Addresses {
		found := false
		for _, aa := range have.Addresses {
			found = found || aa == a
		}
		if !found {
			return false
		}
	}
	// An address this host no longer holds must be withdrawn.
	for _, aa := range have.Addresses {
		if aa.Host != "" && len(want.Hosts) > 0 && aa.Host == want.Hosts[0].Name {
			found := false
			for _, a := range want.Addresses {
				found = found || aa == a
			}
			if !found {
				return false
			}
		}
	}
	return true
}

func sameCondition(have *metav1.Condition, want metav1.Condition) bool {
	return have != nil && have.Status == want.Status && have.ObservedGeneration == want.ObservedGeneration &&
		have.Reason == want.Reason && have.Message == want.Message
}

package agent

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

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
	// ReasonConflict: a frontend (address, protocol, port) of the
	// LoadBalancer is another's, which keeps it.
	ReasonConflict = "Conflict"
	// ReasonInvalid: parts of the LoadBalancer cannot be programmed.
	ReasonInvalid = "Invalid"
	// ReasonOwnNodeOnly: this host is a Node and the only healthy backend,
	// which proxy forwarding cannot serve.
	ReasonOwnNodeOnly = "OwnNodeOnly"
	// ReasonNodeNotOnLink: a backend of a passthrough LoadBalancer is on
	// no link this host shares, so it gets none of the flows.
	ReasonNodeNotOnLink = "NodeNotOnLink"
	// ReasonBGPAddressOnLink (an Event): an address advertised over BGP
	// with proxy forwarding lies in a subnet of the host's interface.
	ReasonBGPAddressOnLink = "BGPAddressOnLink"
	// ReasonAddressConflict (Ready), ReasonInUse and ReasonDefended
	// (AddressConflict): a station that is no load-balancer host claims an
	// address; ReasonNoConflict: none does any more.
	ReasonAddressConflict = "AddressConflict"
	ReasonInUse           = "InUse"
	ReasonDefended        = "Defended"
	ReasonNoConflict      = "NoConflict"
)

// maxProblems is how many problems a condition's message names.
const maxProblems = 10

// hostReport is what one agent says about one LoadBalancer.
type hostReport struct {
	Host       string
	Programmed bool
	Message    string
	Held       []netip.Addr // the LoadBalancer's addresses this host holds
	// Announcing are the LoadBalancer's addresses this host advertises
	// over BGP.
	Announcing []netip.Addr
	// Member is this host's standing among several (nil: none, as with
	// --vip-ownership=none; Solo: a lone agent, whose InUse alone counts).
	Member *membership.Status
	// Problems are the parts of the LoadBalancer this host leaves out.
	Problems Problems
	// ReportsReady: this host writes the LoadBalancer's Ready condition
	// (it holds one of its addresses, or none is usable and it is the one
	// to say so).
	ReportsReady bool
}

// outcome is whether lb is programmed, the reason and the message.
func (r hostReport) outcome() (bool, string, string) {
	switch {
	case !r.Programmed:
		return false, ReasonSyncFailed, r.Message
	case len(r.Problems.Messages) == 0:
		return true, ReasonSynced, r.Message
	}
	msgs := r.Problems.Messages
	if len(msgs) > maxProblems {
		msgs = append(slices.Clone(msgs[:maxProblems]), fmt.Sprintf("and %d more", len(msgs)-maxProblems))
	}
	reason := ReasonInvalid
	switch {
	case r.Problems.Conflict:
		reason = ReasonConflict
	case r.Problems.OwnNodeOnly:
		reason = ReasonOwnNodeOnly
	case r.Problems.NoHealthyBackend:
		reason = ReasonNoHealthyBackend
	case len(r.Problems.OffLink) > 0:
		reason = ReasonNodeNotOnLink
	}
	return false, reason, "not programmed: " + strings.Join(msgs, "; ")
}

// desiredStatus returns the status fields this host owns for lb, and
// whether they differ from what lb's status already says. Conditions keep
// their lastTransitionTime while their status does not change.
func desiredStatus(lb *v1alpha1.LoadBalancer, r hostReport, now metav1.Time) (v1alpha1.LoadBalancerStatus, bool) {
	gen := lb.Generation
	ok, reason, msg := r.outcome()
	programmed := conditionWith(v1alpha1.ConditionProgrammed, ok, reason, gen, msg, now, hostConditions(lb, r.Host))
	conds := []metav1.Condition{programmed}
	if r.Member != nil && !r.Member.Solo {
		conds = append(conds, memberCondition(*r.Member, gen, now, hostConditions(lb, r.Host)))
		if r.Member.Gossip.Reason != "" {
			conds = append(conds, gossipCondition(r.Member.Gossip, gen, now, hostConditions(lb, r.Host)))
		}
	}
	inUse := inUseOf(lb, r.Member)
	if c, write := conflictCondition(hostConditions(lb, r.Host), inUse, r.Host, gen, now); write {
		conds = append(conds, c)
	}
	st := v1alpha1.LoadBalancerStatus{
		Hosts: []v1alpha1.HostStatus{{Name: r.Host, Conditions: conds}},
	}
	for _, a := range r.Announcing {
		st.Hosts[0].Announcing = append(st.Hosts[0].Announcing, a.String())
	}
	for _, u := range inUse {
		st.Hosts[0].InUse = append(st.Hosts[0].InUse, v1alpha1.AddressInUse{
			Address: u.VIP.String(), MAC: u.MAC, Since: metav1.NewTime(u.Since.Truncate(time.Second)), Announced: u.Announced,
		})
	}
	for _, a := range r.Held {
		st.Addresses = append(st.Addresses, v1alpha1.AddressStatus{Address: a.String(), Host: r.Host})
	}
	if (len(r.Held) > 0 || len(r.Announcing) > 0 || r.ReportsReady) && !conflictElsewhere(lb, r, inUse) {
		st.ObservedGeneration = gen
		if ok {
			msg = "every address is held by a host that programmed this generation"
		}
		if slices.ContainsFunc(inUse, func(u membership.InUse) bool { return !u.Announced }) {
			// The same words from every host that sees a conflict: the
			// details are in each one's AddressConflict condition.
			ok, reason, msg = false, ReasonAddressConflict, msgAddressConflict
		}
		st.Conditions = []metav1.Condition{conditionWith(v1alpha1.ConditionReady, ok, reason, gen, msg, now, lb.Status.Conditions)}
	}
	return st, !covers(lb.Status, st)
}

// msgAddressConflict is Ready's message while an address is in use.
const msgAddressConflict = "an address is in use by a station that is no load-balancer host and is not announced: see the AddressConflict condition in status.hosts"

// conflictElsewhere reports whether another host said that an address of
// lb is in use (Ready is false for AddressConflict) and sees no conflict
// itself, while an address of lb is held by no host: this host leaves
// Ready to the host that sees the conflict rather than writing it true
// over that host's false.
func conflictElsewhere(lb *v1alpha1.LoadBalancer, r hostReport, inUse []membership.InUse) bool {
	old := meta.FindStatusCondition(lb.Status.Conditions, v1alpha1.ConditionReady)
	if len(inUse) > 0 || old == nil || old.Reason != ReasonAddressConflict {
		return false
	}
	held := map[string]bool{}
	for _, a := range r.Held {
		held[a.String()] = true
	}
	for _, a := range lb.Status.Addresses {
		if a.Host != "" {
			held[a.Address] = true
		}
	}
	for _, a := range lb.Spec.Addresses {
		if !held[a] {
			return true
		}
	}
	return false
}

// inUseOf returns the addresses of lb that a station which is no
// load-balancer host claims, as member sees them.
func inUseOf(lb *v1alpha1.LoadBalancer, member *membership.Status) []membership.InUse {
	if member == nil {
		return nil
	}
	var out []membership.InUse
	for _, u := range member.InUse {
		if slices.Contains(lb.Spec.Addresses, u.VIP.String()) {
			out = append(out, u)
		}
	}
	return out
}

// conflictMessages says, of each address in use that is announced (or
// not), who claims it.
func conflictMessages(inUse []membership.InUse, host string, announced bool) []string {
	var out []string
	for _, u := range inUse {
		if u.Announced != announced {
			continue
		}
		since := u.Since.UTC().Format(time.RFC3339)
		if announced {
			out = append(out, fmt.Sprintf("%s is also claimed by MAC %s, which is no load-balancer host (seen by %s since %s); %s holds and defends it", u.VIP, u.MAC, host, since, host))
		} else {
			out = append(out, fmt.Sprintf("%s is in use by MAC %s, which is no load-balancer host (seen by %s since %s): not announced", u.VIP, u.MAC, host, since))
		}
	}
	return out
}

// conflictCondition is this host's AddressConflict condition (in
// status.hosts; existing are its conditions there), and whether to write
// it: true while an address it owns is in use; false (NoConflict) once
// none is, when it had the condition.
func conflictCondition(existing []metav1.Condition, inUse []membership.InUse, host string, gen int64, now metav1.Time) (metav1.Condition, bool) {
	msgs := append(conflictMessages(inUse, host, false), conflictMessages(inUse, host, true)...)
	if len(msgs) == 0 {
		if meta.FindStatusCondition(existing, v1alpha1.ConditionAddressConflict) == nil {
			return metav1.Condition{}, false // never in conflict; once it was, false stays written
		}
		return conditionWith(v1alpha1.ConditionAddressConflict, false, ReasonNoConflict, gen, "no station but the load-balancer hosts claims an address this host owns", now, existing), true
	}
	reason := ReasonDefended
	if slices.ContainsFunc(inUse, func(u membership.InUse) bool { return !u.Announced }) {
		reason = ReasonInUse
	}
	// True when the condition holds: conditionWith's ok is the status.
	return conditionWith(v1alpha1.ConditionAddressConflict, true, reason, gen, strings.Join(msgs, "; "), now, existing), true
}

// conditionWith is a condition of type typ, True when ok, with the reason
// and message; it keeps the lastTransitionTime of the existing one while
// its status does not change.
func conditionWith(typ string, ok bool, reason string, gen int64, msg string, now metav1.Time, existing []metav1.Condition) metav1.Condition {
	c := metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: reason, ObservedGeneration: gen, LastTransitionTime: now, Message: msg}
	if !ok {
		c.Status = metav1.ConditionFalse
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

// sameInUse compares two reports of an address in use; the times to the
// second, as the apiserver stores them.
func sameInUse(a, b v1alpha1.AddressInUse) bool {
	return a.Address == b.Address && a.MAC == b.MAC && a.Announced == b.Announced && a.Since.Equal(&b.Since)
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
		var announcing []string
		var inUse []v1alpha1.AddressInUse
		for _, hh := range have.Hosts {
			if hh.Name == h.Name {
				got, announcing, inUse = hh.Conditions, hh.Announcing, hh.InUse
			}
		}
		if !slices.Equal(announcing, h.Announcing) || !slices.EqualFunc(inUse, h.InUse, sameInUse) {
			return false
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

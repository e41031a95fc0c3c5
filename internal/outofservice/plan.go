package outofservice

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/groundcloud/groundcloud/internal/bmc"
	"github.com/groundcloud/groundcloud/internal/config"
)

const (
	// TaintValue is the value of the taint, as the Kubernetes docs of
	// non-graceful node shutdown write it.
	TaintValue = "nodeshutdown"
	// MarkAnnotation on a Node says that its out-of-service taint was
	// applied by this controller, which may therefore remove it. Its value
	// is when the taint was applied (RFC 3339).
	MarkAnnotation = "groundcloud.io/out-of-service-applied"
)

// Taint is the taint applied.
var Taint = corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: TaintValue, Effect: corev1.TaintEffectNoExecute}

// Action is what to do to a Node.
type Action int

const (
	// None leaves the Node as it is.
	None Action = iota
	// Apply adds the taint and the mark.
	Apply
	// Remove removes the taint and the mark.
	Remove
	// Forget removes a mark whose taint someone else removed, so that a
	// taint applied later by a person is not taken for ours.
	Forget
	// Fence powers the machine off through its BMC (bmc-fence =
	// power-off); the Node is tainted later, once the BMC says Off for
	// the grace.
	Fence
)

func (a Action) String() string {
	return [...]string{"none", "apply", "remove", "forget", "fence"}[a]
}

// Observation is what is known of one Node and its machine's BMC.
type Observation struct {
	// Mode is the machine's bmc-out-of-service (config.OutOfServiceOf).
	Mode  config.OutOfService
	Grace time.Duration
	// Status is the machine's BMC status; HasStatus false when there is
	// none, or it was polled with other settings than the cloud-config's.
	Status    bmc.Status
	HasStatus bool
	// Ready is the status of the Node's Ready condition ("" when it has
	// none, which counts as Unknown).
	Ready corev1.ConditionStatus
	// Tainted: the Node has the out-of-service taint (any value or
	// effect); Marked: it has MarkAnnotation.
	Tainted, Marked bool
	// Fence is the machine's bmc-fence (config.FenceOf), FenceAfter
	// bmc-fence-after. NotReadySince is when the Node's Ready condition
	// last changed, when it is not True (zero otherwise, or without the
	// condition); LastFenced when this controller last powered the
	// machine off (zero: not since it started).
	Fence                     config.Fence
	FenceAfter                time.Duration
	NotReadySince, LastFenced time.Time
	Now                       time.Time
}

// Decision is an Action and why, in words for an Event and a log line.
type Decision struct {
	Action Action
	Why    string
}

// Decide is the whole rule. A Node is tainted only when the taint is on
// for its machine, it is NotReady, it carries no out-of-service taint
// already, and its BMC has said Off in every fresh answer for the grace
// period: a BMC that says On, fails, or whose answer is stale never leads
// to a taint. Only a marked taint is removed, and only when the BMC says
// On in a fresh answer and the Node is Ready. A machine is fenced (powered
// off) only when fencing and the taint are on for it, its Node carries no
// out-of-service taint and has been NotReady for FenceAfter, its BMC says
// On in a fresh answer, and it was not fenced in the last FenceAfter.
func Decide(o Observation) Decision {
	ready := o.Ready == corev1.ConditionTrue
	switch {
	case o.Tainted && o.Marked:
		if ready && o.HasStatus && o.Status.Fresh(o.Now) && o.Status.Answer.PowerState == bmc.PowerOn {
			return Decision{Remove, fmt.Sprintf("the BMC says PowerState On (answered %s) and the Node is Ready",
				o.Status.AnsweredAt.UTC().Format(time.RFC3339))}
		}
		return Decision{None, ""}
	case o.Tainted:
		return Decision{None, ""} // someone else's taint: never touched
	case o.Mode != config.OutOfServiceTaint || ready || !o.HasStatus:
		return forgetIf(o.Marked)
	}
	if d, ok := fence(o); ok {
		return d
	}
	off := o.Status.OffFor(o.Now)
	if off == 0 || off < o.Grace {
		return forgetIf(o.Marked)
	}
	return Decision{Apply, fmt.Sprintf("the BMC has said PowerState Off in every answer since %s (%s, grace %s) and the Node's Ready condition is %s",
		o.Status.OffSince.UTC().Format(time.RFC3339), off.Round(time.Second), o.Grace, readyWord(o.Ready))}
}

// fence decides whether to power the machine off; Decide has checked
// that the taint is on, the Node NotReady and untainted, and that there
// is a BMC status.
func fence(o Observation) (Decision, bool) {
	if o.Fence != config.FencePowerOff || o.NotReadySince.IsZero() || !o.Status.Fresh(o.Now) || o.Status.Answer.PowerState != bmc.PowerOn {
		return Decision{}, false
	}
	notReady := o.Now.Sub(o.NotReadySince)
	if notReady < o.FenceAfter || (!o.LastFenced.IsZero() && o.Now.Sub(o.LastFenced) < o.FenceAfter) {
		return Decision{}, false
	}
	return Decision{Fence, fmt.Sprintf("the Node's Ready condition has been %s since %s (%s, bmc-fence-after %s) and the BMC says PowerState On (answered %s)",
		readyWord(o.Ready), o.NotReadySince.UTC().Format(time.RFC3339), notReady.Round(time.Second), o.FenceAfter,
		o.Status.AnsweredAt.UTC().Format(time.RFC3339))}, true
}

func forgetIf(marked bool) Decision {
	if marked {
		return Decision{Forget, "the out-of-service taint this controller applied was removed by someone else"}
	}
	return Decision{None, ""}
}

func readyWord(s corev1.ConditionStatus) corev1.ConditionStatus {
	if s == "" {
		return corev1.ConditionUnknown
	}
	return s
}

package router

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
)

// report is what one router says about one Route.
type report struct {
	Programmed bool
	Reason     string
	Message    string
}

// hostStatus returns this host's status entry for obj, and whether it
// differs from what obj's status already says. The condition keeps its
// lastTransitionTime while its status does not change.
func hostStatus(obj *v1alpha1.Route, host string, r report, now metav1.Time) (v1alpha1.RouteHostStatus, bool) {
	c := metav1.Condition{
		Type: v1alpha1.ConditionProgrammed, Status: metav1.ConditionTrue, Reason: r.Reason, Message: r.Message,
		ObservedGeneration: obj.Generation, LastTransitionTime: now,
	}
	if !r.Programmed {
		c.Status = metav1.ConditionFalse
	}
	var old *metav1.Condition
	for _, h := range obj.Status.Hosts {
		if h.Name == host {
			old = meta.FindStatusCondition(h.Conditions, v1alpha1.ConditionProgrammed)
		}
	}
	if old != nil && old.Status == c.Status {
		c.LastTransitionTime = old.LastTransitionTime
	}
	changed := old == nil || old.Status != c.Status || old.Reason != c.Reason || old.Message != c.Message ||
		old.ObservedGeneration != c.ObservedGeneration
	return v1alpha1.RouteHostStatus{Name: host, Conditions: []metav1.Condition{c}}, changed
}

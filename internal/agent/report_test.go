package agent

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
)

func TestReportInFlight(t *testing.T) {
	q := newReportQueue()
	lb := &v1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", ResourceVersion: "5", Generation: 1}}
	st, changed := desiredStatus(lb, hostReport{Host: "lb-1", Programmed: true, Message: "data plane programmed"}, metav1.Now())
	if !changed {
		t.Fatal("a new LoadBalancer's status must be written")
	}
	if q.inFlight(lb, st) {
		t.Fatal("in flight before any write")
	}
	q.wrote(lb, st)
	if !q.inFlight(lb, st) {
		t.Error("the same status for the same cached version must not be written again")
	}
	failed, _ := desiredStatus(lb, hostReport{Host: "lb-1", Programmed: false, Message: "boom"}, metav1.Now())
	if q.inFlight(lb, failed) {
		t.Error("a different status must be written")
	}
	newer := lb.DeepCopy()
	newer.ResourceVersion = "6"
	if q.inFlight(newer, st) {
		t.Error("a newer cached version must be compared afresh")
	}
	q.prune(nil)
	if q.inFlight(lb, st) {
		t.Error("prune kept a LoadBalancer that is gone")
	}
}

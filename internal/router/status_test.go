package router

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
)

func TestHostStatus(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	ok := report{Programmed: true, Reason: ReasonProgrammed, Message: "10.244.2.0/24 via 192.0.2.12"}
	conflict := report{Reason: ReasonConflict, Message: "foreign"}
	withHost := func(name string, c metav1.Condition) *v1alpha1.Route {
		r := newRoute("node-2", "10.244.2.0/24", "192.0.2.12")
		r.Status.Hosts = []v1alpha1.RouteHostStatus{{Name: "other", Conditions: []metav1.Condition{{Type: "Programmed", Status: "False"}}}}
		if name != "" {
			r.Status.Hosts = append(r.Status.Hosts, v1alpha1.RouteHostStatus{Name: name, Conditions: []metav1.Condition{c}})
		}
		return r
	}
	programmed := metav1.Condition{Type: "Programmed", Status: "True", Reason: ReasonProgrammed, Message: ok.Message, ObservedGeneration: 1, LastTransitionTime: t0}
	for _, tc := range []struct {
		name    string
		obj     *v1alpha1.Route
		rep     report
		want    metav1.Condition
		changed bool
	}{
		{name: "first report", obj: withHost("", metav1.Condition{}), rep: ok,
			want: metav1.Condition{Type: "Programmed", Status: "True", Reason: ReasonProgrammed, Message: ok.Message, ObservedGeneration: 1, LastTransitionTime: t1}, changed: true},
		{name: "same again: no write, time kept", obj: withHost("me", programmed), rep: ok, want: programmed},
		{name: "failure", obj: withHost("me", programmed), rep: conflict,
			want: metav1.Condition{Type: "Programmed", Status: "False", Reason: ReasonConflict, Message: "foreign", ObservedGeneration: 1, LastTransitionTime: t1}, changed: true},
		{name: "new generation", obj: func() *v1alpha1.Route { r := withHost("me", programmed); r.Generation = 2; return r }(), rep: ok,
			want: metav1.Condition{Type: "Programmed", Status: "True", Reason: ReasonProgrammed, Message: ok.Message, ObservedGeneration: 2, LastTransitionTime: t0}, changed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := hostStatus(tc.obj, "me", tc.rep, t1)
			if diff := cmp.Diff(v1alpha1.RouteHostStatus{Name: "me", Conditions: []metav1.Condition{tc.want}}, got); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if changed != tc.changed {
				t.Errorf("changed = %v, want %v", changed, tc.changed)
			}
		})
	}
}

package agent

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/tools/record"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/dataplane"
)

func TestNeverServed(t *testing.T) {
	svc := func(name string, healthy ...bool) dataplane.Service {
		s := dataplane.Service{Name: name}
		for _, h := range healthy {
			s.Backends = append(s.Backends, dataplane.Backend{Healthy: h})
		}
		return s
	}
	st := dataplane.State{Services: []dataplane.Service{
		svc("ns/new-down", false, false), // never healthy: reported
		svc("ns/was-up", false, false),   // healthy before: a failure, not a set-up problem
		svc("ns/up", false, true),
		svc("ns/no-nodes"),
	}}
	never, served := neverServed(st, map[string]bool{"ns/was-up": true, "ns/gone": true})
	if diff := cmp.Diff([]string{"ns/new-down"}, never); diff != "" {
		t.Errorf("never served (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]bool{"ns/was-up": true, "ns/up": true}, served); diff != "" {
		t.Errorf("served (-want +got):\n%s", diff)
	}
}

func TestNeverHealthyMessage(t *testing.T) {
	lb := newLB("web")
	lb.Spec.HealthCheck = &v1alpha1.HealthCheck{Type: v1alpha1.HealthCheckHTTP, Port: 10256, Path: "/healthz"}
	if msg := neverHealthyMessage(lb); !strings.Contains(msg, "HTTP GET :10256/healthz") || !strings.Contains(msg, "cluster-health-check") {
		t.Errorf("Cluster: %s", msg)
	}
	lb.Spec.HealthCheck = &v1alpha1.HealthCheck{Type: v1alpha1.HealthCheckTCP, Port: 30080}
	if msg := neverHealthyMessage(lb); !strings.Contains(msg, "TCP connection to :30080") {
		t.Errorf("TCP: %s", msg)
	}
	lb.Spec.ExternalTrafficPolicy = "Local"
	if msg := neverHealthyMessage(lb); strings.Contains(msg, "cluster-health-check") || !strings.Contains(msg, "ready Pod") {
		t.Errorf("Local: %s", msg)
	}
}

// TestNoteNeverHealthy: a LoadBalancer none of whose backends has been
// healthy is a problem with reason NoHealthyBackend, and a Warning Event
// the first time only; once a backend was healthy, it is not.
func TestNoteNeverHealthy(t *testing.T) {
	events := record.NewFakeRecorder(10)
	a := &Agent{cfg: Config{Host: "lb-1", Events: events}}
	lb := newLB("web")
	down := Plan{State: dataplane.State{Services: []dataplane.Service{{Name: "default/web", Backends: []dataplane.Backend{{Node: "n"}}}}}}
	for range 2 {
		plan := down
		plan.Problems = nil
		a.noteNeverHealthy([]*v1alpha1.LoadBalancer{lb}, &plan)
		if p := plan.Problems["default/web"]; !p.NoHealthyBackend || len(p.Messages) != 1 {
			t.Fatalf("problems %+v", plan.Problems)
		}
		if ok, reason, _ := (hostReport{Programmed: true, Problems: plan.Problems["default/web"]}).outcome(); ok || reason != ReasonNoHealthyBackend {
			t.Errorf("outcome %v %s, want not programmed, %s", ok, reason, ReasonNoHealthyBackend)
		}
	}
	if n := len(events.Events); n != 1 {
		t.Errorf("%d events, want 1", n)
	}
	if e := <-events.Events; !strings.Contains(e, "Warning NoHealthyBackend") {
		t.Errorf("event %q", e)
	}
	up := Plan{State: dataplane.State{Services: []dataplane.Service{{Name: "default/web", Backends: []dataplane.Backend{{Node: "n", Healthy: true}}}}}}
	a.noteNeverHealthy([]*v1alpha1.LoadBalancer{lb}, &up)
	plan := down
	plan.Problems = nil
	a.noteNeverHealthy([]*v1alpha1.LoadBalancer{lb}, &plan)
	if len(plan.Problems) != 0 {
		t.Errorf("after a healthy backend, problems %+v", plan.Problems)
	}
}

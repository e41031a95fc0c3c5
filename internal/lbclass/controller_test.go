package lbclass

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	cloudprovider "k8s.io/cloud-provider"
)

// recordingLB is a cloudprovider.LoadBalancer that records each call with
// the Service's finalizers as the apiserver holds them at that moment.
type recordingLB struct {
	kube *kubefake.Clientset

	mu    sync.Mutex
	calls []string
	held  map[string]bool
}

var _ cloudprovider.LoadBalancer = (*recordingLB)(nil)

func (r *recordingLB) record(ctx context.Context, verb string, svc *v1.Service) {
	stored, err := r.kube.CoreV1().Services(svc.Namespace).Get(ctx, svc.Name, metav1.GetOptions{})
	finalized := err == nil && slices.Contains(stored.Finalizers, Finalizer)
	r.mu.Lock()
	defer r.mu.Unlock()
	call := verb + " " + svc.Name
	if finalized {
		call += " (finalizer on)"
	}
	r.calls = append(r.calls, call)
}

func (r *recordingLB) recorded() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

func (r *recordingLB) GetLoadBalancer(_ context.Context, _ string, svc *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return nil, r.held[svc.Name], nil
}

func (r *recordingLB) GetLoadBalancerName(_ context.Context, _ string, svc *v1.Service) string {
	return svc.Name
}

func (r *recordingLB) EnsureLoadBalancer(ctx context.Context, _ string, svc *v1.Service, _ []*v1.Node) (*v1.LoadBalancerStatus, error) {
	r.record(ctx, "ensure", svc)
	r.mu.Lock()
	r.held[svc.Name] = true
	r.mu.Unlock()
	return &v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: "192.0.2.200"}}}, nil
}

func (r *recordingLB) UpdateLoadBalancer(ctx context.Context, _ string, svc *v1.Service, _ []*v1.Node) error {
	r.record(ctx, "update", svc)
	return nil
}

func (r *recordingLB) EnsureLoadBalancerDeleted(ctx context.Context, _ string, svc *v1.Service) error {
	r.record(ctx, "delete", svc)
	r.mu.Lock()
	delete(r.held, svc.Name)
	r.mu.Unlock()
	return nil
}

func startController(t *testing.T, objs ...*v1.Service) (*recordingLB, *kubefake.Clientset) {
	t.Helper()
	kube := kubefake.NewClientset()
	for _, o := range objs {
		if _, err := kube.CoreV1().Services(o.Namespace).Create(t.Context(), o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	lb := &recordingLB{kube: kube, held: map[string]bool{}}
	f := informers.NewSharedInformerFactory(kube, 0)
	c := New(lb, kube, f.Core().V1().Services(), f.Core().V1().Nodes(), "kubernetes")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go c.Run(ctx, 2)
	f.Start(ctx.Done())
	return lb, kube
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func get(t *testing.T, kube *kubefake.Clientset, name string) *v1.Service {
	t.Helper()
	svc, err := kube.CoreV1().Services("default").Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// TestServesOnlyItsClass: a Service of the class gets the finalizer before
// its first Ensure and its status after; Services without a class or of
// another class are never touched; a type change away from LoadBalancer
// deletes the load balancer, clears the status and then the finalizer.
func TestServesOnlyItsClass(t *testing.T) {
	lb, kube := startController(t,
		newService("foreign", withClass("example.com/other")),
		newService("plain"),
		newService("ours", withClass(Class)),
	)
	eventually(t, "ours served", func() bool {
		s := get(t, kube, "ours")
		return slices.Contains(s.Finalizers, Finalizer) && len(s.Status.LoadBalancer.Ingress) == 1
	})
	for _, name := range []string{"foreign", "plain"} {
		if s := get(t, kube, name); len(s.Finalizers) > 0 || len(s.Status.LoadBalancer.Ingress) > 0 {
			t.Errorf("%s touched: finalizers %v, status %+v", name, s.Finalizers, s.Status)
		}
	}

	s := get(t, kube, "ours")
	s.Spec.Type = v1.ServiceTypeClusterIP
	s.Spec.LoadBalancerClass = nil
	if _, err := kube.CoreV1().Services("default").Update(t.Context(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "ours released", func() bool {
		s := get(t, kube, "ours")
		return len(s.Finalizers) == 0 && len(s.Status.LoadBalancer.Ingress) == 0
	})
	want := []string{"ensure ours (finalizer on)", "delete ours (finalizer on)"}
	if diff := cmp.Diff(want, lb.recorded()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

// servicePatches counts the patches of Services among kube's actions.
func servicePatches(kube *kubefake.Clientset) int {
	n := 0
	for _, a := range kube.Actions() {
		if a.GetVerb() == "patch" && a.GetResource().Resource == "services" {
			n++
		}
	}
	return n
}

// TestSyncOfServedServiceWritesNothing: a Service that already carries the
// finalizer and the status the provider returns is synced without a
// write; one without them gets each once.
func TestSyncOfServedServiceWritesNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		svc  *v1.Service
		want int
	}{
		{"served", newService("web", withClass(Class), withFinalizers(Finalizer), withIngress("192.0.2.200")), 0},
		{"finalizer only", newService("web", withClass(Class), withFinalizers(Finalizer)), 1},
		{"new", newService("web", withClass(Class)), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kube := kubefake.NewClientset(tc.svc)
			lb := &recordingLB{kube: kube, held: map[string]bool{}}
			f := informers.NewSharedInformerFactory(kube, 0)
			c := New(lb, kube, f.Core().V1().Services(), f.Core().V1().Nodes(), "kubernetes")
			f.Start(t.Context().Done())
			f.WaitForCacheSync(t.Context().Done())
			kube.ClearActions()
			if err := c.sync(t.Context(), "default/web"); err != nil {
				t.Fatal(err)
			}
			if got := servicePatches(kube); got != tc.want {
				t.Errorf("sync patched the Service %d times, want %d", got, tc.want)
			}
		})
	}
}

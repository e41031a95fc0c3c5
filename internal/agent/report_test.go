package agent

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/lbapi"
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
	q.prune([]*v1alpha1.LoadBalancer{lb})
	if !q.inFlight(lb, st) {
		t.Error("prune forgot a write whose version the cache still has")
	}
	q.prune([]*v1alpha1.LoadBalancer{newer})
	if len(q.written) != 0 {
		t.Error("prune kept a write whose object the cache has in a newer version")
	}
	q.wrote(lb, st)
	q.prune(nil)
	if q.inFlight(lb, st) {
		t.Error("prune kept a LoadBalancer that is gone")
	}
}

// TestReportSkipsLoadBalancersGoneFromTheCache: a LoadBalancer deleted
// between a sync and its report gets no status write (and no crash).
func TestReportSkipsLoadBalancersGoneFromTheCache(t *testing.T) {
	scheme := runtime.NewScheme()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme,
		map[schema.GroupVersionResource]string{lbapi.Resource: "LoadBalancerList"})
	inf := lbapi.NewInformer(dyn, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	a := &Agent{cfg: Config{Host: "lb-1"}, client: lbapi.NewClient(dyn), lister: lbapi.NewLister(inf), reports: newReportQueue()}
	gone := &v1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gone", Generation: 1}}
	a.report(ctx, []*v1alpha1.LoadBalancer{gone}, nil, nil, nil, nil)
	for _, act := range dyn.Actions() {
		if act.GetVerb() != "list" && act.GetVerb() != "watch" {
			t.Errorf("unexpected %s of %s", act.GetVerb(), act.GetResource().Resource)
		}
	}
}

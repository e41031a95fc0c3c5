package loadbalancers

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
)

func lbAt(rv string) *v1alpha1.LoadBalancer {
	return &v1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", ResourceVersion: rv}}
}

// TestWriteCache: the Manager compares against its own last write until
// the informer has moved past the object that write replaced.
func TestWriteCache(t *testing.T) {
	key := types.NamespacedName{Namespace: "default", Name: "web"}
	c := writeCache{m: map[types.NamespacedName]lastWrite{}}
	if got := c.current(key, lbAt("1")); got.ResourceVersion != "1" {
		t.Fatalf("nothing written: got %q, want the cached object", got.ResourceVersion)
	}

	c.remember(key, "", lbAt("2")) // a create the informer has not shown
	if got := c.current(key, nil); got == nil || got.ResourceVersion != "2" {
		t.Fatalf("after a create: got %v, want the created object", got)
	}
	c.observed(key, "2")
	if got := c.current(key, lbAt("2")); got.ResourceVersion != "2" {
		t.Fatalf("create seen: got %q", got.ResourceVersion)
	}

	c.remember(key, "2", lbAt("3")) // an update over 2
	if got := c.current(key, lbAt("2")); got.ResourceVersion != "3" {
		t.Fatalf("cache still at 2: got %q, want our write 3", got.ResourceVersion)
	}
	c.observed(key, "2") // a late event for 2 keeps it
	if got := c.current(key, lbAt("2")); got.ResourceVersion != "3" {
		t.Fatalf("after a late event: got %q, want 3", got.ResourceVersion)
	}
	c.observed(key, "4") // someone else wrote after us
	if got := c.current(key, lbAt("4")); got.ResourceVersion != "4" {
		t.Fatalf("cache moved on: got %q, want 4", got.ResourceVersion)
	}
	if len(c.m) != 0 {
		t.Errorf("%d entries left once the informer caught up", len(c.m))
	}

	c.remember(key, "4", lbAt("5"))
	c.forget(key) // deleted
	if got := c.current(key, nil); got != nil {
		t.Errorf("after a delete: got %v, want nil", got)
	}
}

// TestWriteRetriesAConflict: an update over a stale object is tried once
// more over the stored one.
func TestWriteRetriesAConflict(t *testing.T) {
	dyn := newFakeDynamic()
	conflicts := 0
	dyn.PrependReactor("update", "loadbalancers", func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts == 0 {
			conflicts++
			return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "groundcloud.io", Resource: "loadbalancers"}, "web", nil)
		}
		return false, nil, nil
	})
	h := startManager(t, dyn, newNode("a", withAddr(v1.NodeInternalIP, "192.0.2.11")))
	h.mustEnsure(newSvc("web"))
	waitCached(t, h.m, 1)
	h.mustEnsure(newSvc("web", func(s *v1.Service) { s.Spec.SessionAffinity = v1.ServiceAffinityClientIP }))
	if conflicts != 1 || h.object("web").Spec.SessionAffinity != "ClientIP" {
		t.Errorf("conflicts %d, affinity %q; want the update to succeed after one conflict", conflicts, h.object("web").Spec.SessionAffinity)
	}
}

package agent

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
)

// A status write that fails is tried again by a sync of its own, although
// nothing else changes (testAgent syncs at most once a minute unasked):
// this host's membership state must not wait for the next change.
func TestFailedStatusWriteIsRetried(t *testing.T) {
	lb := newLB("web", func(lb *v1alpha1.LoadBalancer) { lb.Spec.HealthCheck = nil })
	a := testAgent(t, Config{DataPlane: &recordingDataPlane{}}, lb)
	var writes atomic.Int32
	var failing atomic.Bool
	failing.Store(true)
	a.cfg.Dynamic.(*dynamicfake.FakeDynamicClient).PrependReactor("patch", "loadbalancers", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "status" {
			return false, nil, nil
		}
		writes.Add(1)
		if failing.Load() {
			return true, nil, errors.New("injected: connection reset")
		}
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(v1alpha1.SchemeGroupVersion.String())
		u.SetKind("LoadBalancer")
		u.SetNamespace(lb.Namespace)
		u.SetName(lb.Name)
		return true, u, nil
	})
	runAgent(t, a)
	waitFor(t, "a status write", func() bool { return writes.Load() >= 1 })
	time.Sleep(500 * time.Millisecond) // the syncs of the start are over
	failing.Store(false)
	failed := writes.Load()
	waitFor(t, "the failed status write to be tried again", func() bool { return writes.Load() > failed })
}

// Membership's LinkUp hook closes the agent's connections to the apiserver
// (Config.Reconnect), so that what it writes next goes out on new ones.
func TestLinkUpReconnects(t *testing.T) {
	var closed atomic.Int32
	a := testAgent(t, Config{DataPlane: &recordingDataPlane{}, Reconnect: func() { closed.Add(1) }})
	a.membershipHooks(t.Context()).LinkUp()
	if n := closed.Load(); n != 1 {
		t.Errorf("Reconnect called %d times on LinkUp, want once", n)
	}
}

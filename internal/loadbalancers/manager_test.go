package loadbalancers

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/cloud-provider/api"

	"github.com/groundcloud/groundcloud/internal/config"
	"github.com/groundcloud/groundcloud/internal/ipam"
	"github.com/groundcloud/groundcloud/internal/lbapi"
)

const poolConfig = "[Global]\nregion = lab\n\n[Pool \"default\"]\naddresses = 192.0.2.200-192.0.2.201\n"

func newFakeDynamic(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	// An empty scheme keeps the objects unstructured, as the apiserver's are.
	scheme := runtime.NewScheme()
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme,
		map[schema.GroupVersionResource]string{lbapi.Resource: "LoadBalancerList"}, objs...)
}

func startManager(t *testing.T, dyn *dynamicfake.FakeDynamicClient) *Manager {
	t.Helper()
	cfg, err := config.Parse("test", []byte(poolConfig))
	if err != nil {
		t.Fatal(err)
	}
	m := NewManager(dyn, func() *config.Config { return cfg }, nil)
	m.install = func(context.Context) error { return nil }
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go m.Run(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for !m.isReady() {
		if time.Now().After(deadline) {
			t.Fatal("manager not ready")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return m
}

func newSvc(name string, mods ...func(*v1.Service)) *v1.Service {
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Spec: v1.ServiceSpec{
			Type:  v1.ServiceTypeLoadBalancer,
			Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080}},
		},
	}
	for _, m := range mods {
		m(s)
	}
	return s
}

func apiWrites(dyn *dynamicfake.FakeDynamicClient) []string {
	var out []string
	for _, a := range dyn.Actions() {
		switch a.GetVerb() {
		case "create", "update", "patch", "delete":
			name := ""
			if n, ok := a.(interface{ GetName() string }); ok {
				name = n.GetName()
			}
			if c, ok := a.(k8stesting.CreateAction); ok {
				if o, ok := c.GetObject().(metav1.Object); ok {
					name = o.GetName()
				}
			}
			out = append(out, a.GetVerb()+" "+name)
		}
	}
	return out
}

// waitCached waits until the informer has seen n objects.
func waitCached(t *testing.T, m *Manager, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		lbs, _ := m.lister.List()
		if len(lbs) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cache has %d objects, want %d", len(lbs), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestEnsureWritesOnlyChanges(t *testing.T) {
	ctx := context.Background()
	dyn := newFakeDynamic()
	m := startManager(t, dyn)
	node := newNode("a", withAddr(v1.NodeInternalIP, "192.0.2.11"))

	st, err := m.Ensure(ctx, newSvc("web"), []*v1.Node{node})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Ingress) != 1 || st.Ingress[0].IP != "192.0.2.200" {
		t.Fatalf("status = %+v", st)
	}
	waitCached(t, m, 1)
	dyn.ClearActions()

	if _, err := m.Ensure(ctx, newSvc("web"), []*v1.Node{node}); err != nil {
		t.Fatal(err)
	}
	if w := apiWrites(dyn); len(w) != 0 {
		t.Fatalf("unchanged Ensure wrote %v", w)
	}

	node2 := newNode("b", withAddr(v1.NodeInternalIP, "192.0.2.12"))
	if _, err := m.Ensure(ctx, newSvc("web"), []*v1.Node{node, node2}); err != nil {
		t.Fatal(err)
	}
	if w := apiWrites(dyn); len(w) != 1 || w[0] != "update web" {
		t.Fatalf("Ensure with a new node wrote %v, want one update", w)
	}
}

func TestImpossibleRequestsAllocateNothing(t *testing.T) {
	ctx := context.Background()
	dyn := newFakeDynamic()
	m := startManager(t, dyn)
	for _, tt := range []struct {
		name string
		svc  *v1.Service
		want error
	}{
		{"outside every pool", newSvc("outside", func(s *v1.Service) {
			s.Annotations = map[string]string{ipam.AnnotationLoadBalancerIPs: "203.0.113.5"}
		}), ipam.ErrNotInPool},
		{"unknown pool", newSvc("nopool", func(s *v1.Service) {
			s.Annotations = map[string]string{ipam.AnnotationPool: "gold"}
		}), ipam.ErrUnknownPool},
		{"family unavailable", newSvc("v6", func(s *v1.Service) { s.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol} }), ipam.ErrFamilyUnavailable},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := m.Ensure(ctx, tt.svc, nil)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Ensure = %v, want %v", err, tt.want)
			}
		})
	}
	if w := apiWrites(dyn); len(w) != 0 {
		t.Fatalf("failed Ensures wrote %v", w)
	}
	// Both addresses of the pool are still free.
	for _, name := range []string{"x", "y"} {
		if _, err := m.Ensure(ctx, newSvc(name), nil); err != nil {
			t.Fatalf("pool lost an address to a failed request: %v", err)
		}
	}
	_, err := m.Ensure(ctx, newSvc("z"), nil)
	if !errors.Is(err, ipam.ErrPoolExhausted) || !strings.Contains(err.Error(), "default") {
		t.Fatalf("third service: %v, want pool default exhausted", err)
	}
}

func TestRestartRebuildsAllocator(t *testing.T) {
	ctx := context.Background()
	dyn := newFakeDynamic()
	m := startManager(t, dyn)
	if _, err := m.Ensure(ctx, newSvc("web"), nil); err != nil {
		t.Fatal(err)
	}
	waitCached(t, m, 1)

	// A new manager over the same objects, as after a restart.
	dyn.ClearActions()
	m2 := startManager(t, dyn)
	st, err := m2.Ensure(ctx, newSvc("web"), nil)
	if err != nil || st.Ingress[0].IP != "192.0.2.200" {
		t.Fatalf("re-ensure after restart = %+v, %v; want 192.0.2.200", st, err)
	}
	st, err = m2.Ensure(ctx, newSvc("other"), nil)
	if err != nil || st.Ingress[0].IP != "192.0.2.201" {
		t.Fatalf("new service after restart = %+v, %v; want the other address", st, err)
	}
	if w := apiWrites(dyn); len(w) != 1 || w[0] != "create other" {
		t.Fatalf("writes after restart = %v, want only the new service's create", w)
	}
}

func TestNotReadyIsRetried(t *testing.T) {
	defer func(d time.Duration) { readyWait = d }(readyWait)
	readyWait = 50 * time.Millisecond
	m := NewManager(newFakeDynamic(), nil, nil)
	_, err := m.Ensure(context.Background(), newSvc("web"), nil)
	var retry *api.RetryError
	if !errors.As(err, &retry) {
		t.Fatalf("Ensure before the rebuild = %v, want a RetryError", err)
	}
}

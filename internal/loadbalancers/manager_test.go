package loadbalancers

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/cloud-provider/api"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/addresspools"
	"github.com/groundcloud/groundcloud/internal/annotation"
	"github.com/groundcloud/groundcloud/internal/config"
	"github.com/groundcloud/groundcloud/internal/ipam"
	"github.com/groundcloud/groundcloud/internal/lbapi"
)

const poolConfig = "[Global]\nregion = lab\n\n[Pool \"default\"]\naddresses = 192.0.2.200-192.0.2.201\n"

func newFakeDynamic(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	// An empty scheme keeps the objects unstructured, as the apiserver's are.
	scheme := runtime.NewScheme()
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme,
		map[schema.GroupVersionResource]string{lbapi.Resource: "LoadBalancerList", addresspools.Resource: "AddressPoolList"}, objs...)
}

// harness is a Manager over fake clients: LoadBalancers in dyn, Nodes and
// Services in kube.
type harness struct {
	t    *testing.T
	ctx  context.Context
	dyn  *dynamicfake.FakeDynamicClient
	kube *kubefake.Clientset
	m    *Manager
}

// startManager runs a Manager over dyn and a cluster holding objs (Nodes,
// Services) until the test ends, and waits until it is ready.
func startManager(t *testing.T, dyn *dynamicfake.FakeDynamicClient, objs ...runtime.Object) *harness {
	t.Helper()
	var cfg atomic.Pointer[config.Config]
	cfg.Store(mustParse(t, poolConfig))
	return startManagerConfig(t, dyn, &cfg, objs...)
}

// startManagerConfig is startManager with the cloud-config cfg holds at
// each moment, as a reloading watcher's is.
func startManagerConfig(t *testing.T, dyn *dynamicfake.FakeDynamicClient, cfg *atomic.Pointer[config.Config], objs ...runtime.Object) *harness {
	t.Helper()
	kube := kubefake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(kube, 0)
	m := NewManager(dyn, cfg.Load, factory, nil)
	m.install = func(context.Context) error { return nil }
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go m.Run(ctx)
	factory.Start(ctx.Done())
	h := &harness{t: t, ctx: ctx, dyn: dyn, kube: kube, m: m}
	h.eventually("the manager is ready", m.isReady)
	return h
}

// eventually polls cond for up to 10 s: a safety net, not a measure.
func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// setService stores svc in the cluster and waits until the Manager's cache
// has it.
func (h *harness) setService(svc *v1.Service) {
	h.t.Helper()
	svcs := h.kube.CoreV1().Services(svc.Namespace)
	if _, err := svcs.Create(h.ctx, svc, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		_, err = svcs.Update(h.ctx, svc, metav1.UpdateOptions{})
		if err != nil {
			h.t.Fatal(err)
		}
	} else if err != nil {
		h.t.Fatal(err)
	}
	h.eventually("the cache to hold service "+svc.Name, func() bool {
		got, err := h.m.services.Services(svc.Namespace).Get(svc.Name)
		return err == nil && equality.Semantic.DeepEqual(got.Spec, svc.Spec) && equality.Semantic.DeepEqual(got.Annotations, svc.Annotations)
	})
}

// ensure stores svc in the cluster and calls Ensure, as the service
// controller does on a change.
func (h *harness) ensure(svc *v1.Service) (*v1.LoadBalancerStatus, error) {
	h.t.Helper()
	h.setService(svc)
	return h.m.Ensure(h.ctx, svc, nil)
}

func (h *harness) mustEnsure(svc *v1.Service) *v1.LoadBalancerStatus {
	h.t.Helper()
	st, err := h.ensure(svc)
	if err != nil {
		h.t.Fatalf("Ensure %s: %v", svc.Name, err)
	}
	return st
}

// object reads a LoadBalancer from the fake API, or nil.
func (h *harness) object(name string) *v1alpha1.LoadBalancer {
	h.t.Helper()
	lb, err := lbapi.NewClient(h.dyn).Get(h.ctx, "default", name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return lb
}

func (h *harness) setNode(n *v1.Node) {
	h.t.Helper()
	nodes := h.kube.CoreV1().Nodes()
	if _, err := nodes.Create(h.ctx, n, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		if _, err := nodes.Update(h.ctx, n, metav1.UpdateOptions{}); err != nil {
			h.t.Fatal(err)
		}
	} else if err != nil {
		h.t.Fatal(err)
	}
}

// settle waits until the queue has refreshed key once more.
func (h *harness) settle(key string) {
	h.t.Helper()
	done := make(chan struct{})
	h.m.queue.Add(types.NamespacedName{Namespace: "default", Name: key})
	go func() {
		for h.m.queue.Len() > 0 {
			time.Sleep(time.Millisecond)
		}
		// The worker that took it holds the key's lock until it is done.
		h.m.locks.lock(types.NamespacedName{Namespace: "default", Name: key})()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		h.t.Fatal("queue did not settle")
	}
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

func withAnnotation(k, v string) func(*v1.Service) {
	return func(s *v1.Service) {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[k] = v
	}
}

func apiWrites(dyn *dynamicfake.FakeDynamicClient) []string {
	var out []string
	for _, a := range dyn.Actions() {
		if a.GetResource() != lbapi.Resource {
			continue // AddressPools: see TestAddressPools
		}
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
	h := startManager(t, newFakeDynamic(), newNode("a", withAddr(v1.NodeInternalIP, "192.0.2.11")))
	st := h.mustEnsure(newSvc("web"))
	if len(st.Ingress) != 1 || st.Ingress[0].IP != "192.0.2.200" {
		t.Fatalf("status = %+v", st)
	}
	waitCached(t, h.m, 1)
	h.dyn.ClearActions()

	h.mustEnsure(newSvc("web"))
	if w := apiWrites(h.dyn); len(w) != 0 {
		t.Fatalf("unchanged Ensure wrote %v", w)
	}

	// A node change is not part of the object: Ensure writes nothing.
	h.setNode(newNode("b", withAddr(v1.NodeInternalIP, "192.0.2.12")))
	h.mustEnsure(newSvc("web"))
	h.settle("web")
	if w := apiWrites(h.dyn); len(w) != 0 {
		t.Fatalf("a new node wrote %v, want nothing", w)
	}
}

// TestDeletedObjectComesBack: a LoadBalancer deleted by hand is written
// again with the same address while its Service holds it, and not once the
// Service is gone.
func TestDeletedObjectComesBack(t *testing.T) {
	h := startManager(t, newFakeDynamic(), newNode("a", withAddr(v1.NodeInternalIP, "192.0.2.11")))
	h.mustEnsure(newSvc("other"))
	h.mustEnsure(newSvc("web"))
	want := h.object("web")
	waitCached(t, h.m, 2)

	lbs := h.dyn.Resource(lbapi.Resource).Namespace("default")
	if err := lbs.Delete(h.ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("web to come back", func() bool { return h.object("web") != nil })
	got := h.object("web")
	if diff := cmp.Diff(want.Spec, got.Spec); diff != "" {
		t.Errorf("re-created spec (-want +got):\n%s", diff)
	}
	if got.Spec.Addresses[0] != "192.0.2.201" || !hasOwner(got, ownerReference(newSvc("web"))) {
		t.Errorf("re-created object: addresses %v, owners %v", got.Spec.Addresses, got.OwnerReferences)
	}

	// The Service is gone; the service controller has not called Delete yet.
	if err := h.kube.CoreV1().Services("default").Delete(h.ctx, "other", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("the cache to lose service other", func() bool {
		_, err := h.m.services.Services("default").Get("other")
		return apierrors.IsNotFound(err)
	})
	if err := lbs.Delete(h.ctx, "other", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.settle("other")
	if h.object("other") != nil {
		t.Error("the LoadBalancer of a deleted Service came back")
	}
}

// TestFailedWriteStrandsNothing: Ensure assigns, the write fails, the
// Service goes. Get must still say there is a load balancer, so that the
// service controller calls Delete, which frees the address.
func TestFailedWriteStrandsNothing(t *testing.T) {
	dyn := newFakeDynamic()
	dyn.PrependReactor("create", "loadbalancers", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if o, ok := a.(k8stesting.CreateAction).GetObject().(metav1.Object); ok && o.GetName() == "doomed" {
			return true, nil, apierrors.NewInternalError(errors.New("injected"))
		}
		return false, nil, nil
	})
	h := startManager(t, dyn)
	doomed := newSvc("doomed")
	if _, err := h.ensure(doomed); err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("Ensure = %v, want the injected error", err)
	}
	st, exists, err := h.m.Get(h.ctx, doomed)
	if err != nil || !exists || len(st.Ingress) != 1 || st.Ingress[0].IP != "192.0.2.200" {
		t.Fatalf("Get after a failed write = %+v, %v, %v; want 192.0.2.200, exists", st, exists, err)
	}
	if err := h.m.Delete(h.ctx, doomed); err != nil {
		t.Fatal(err)
	}
	if _, exists, _ := h.m.Get(h.ctx, doomed); exists {
		t.Error("Get after Delete says the load balancer exists")
	}
	for _, name := range []string{"x", "y"} {
		if _, err := h.ensure(newSvc(name)); err != nil {
			t.Errorf("the pool lost an address to a failed write: %v", err)
		}
	}
}

func TestImpossibleRequestsAllocateNothing(t *testing.T) {
	h := startManager(t, newFakeDynamic())
	manyRanges := make([]string, MaxSourceRanges+1)
	for i := range manyRanges {
		manyRanges[i] = "10.0." + string(rune('0'+i/100)) + string(rune('0'+i/10%10)) + string(rune('0'+i%10)) + ".0/24"
	}
	for _, tt := range []struct {
		name    string
		svc     *v1.Service
		want    error
		message string
	}{
		{"outside every pool", newSvc("outside", withAnnotation(annotation.LoadBalancerIPs, "203.0.113.5")), ipam.ErrNotInPool, "203.0.113.5"},
		{"unknown pool", newSvc("nopool", withAnnotation(annotation.Pool, "gold")), ipam.ErrUnknownPool, "gold"},
		{"family unavailable", newSvc("v6", func(s *v1.Service) { s.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol} }), ipam.ErrFamilyUnavailable, "IPv6"},
		{"too many ports", newSvc("ports", func(s *v1.Service) { s.Spec.Ports = manyPorts(MaxPorts + 1) }), ErrLimit, "at most 100"},
		{"too many source ranges", newSvc("ranges", func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = manyRanges }), ErrSourceRanges, "(100)"},
		{"a bad source range", newSvc("bad-range", withAnnotation(v1.AnnotationLoadBalancerSourceRangesKey, "10.0.0.0/8,bogus")), ErrSourceRanges, `"bogus"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.ensure(tt.svc)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.message) {
				t.Fatalf("Ensure = %v, want %v mentioning %q", err, tt.want, tt.message)
			}
			if _, exists, _ := h.m.Get(h.ctx, tt.svc); exists {
				t.Error("Get says a refused Service has a load balancer")
			}
		})
	}
	if w := apiWrites(h.dyn); len(w) != 0 {
		t.Fatalf("failed Ensures wrote %v", w)
	}
	// Both addresses of the pool are still free.
	for _, name := range []string{"x", "y"} {
		if _, err := h.ensure(newSvc(name)); err != nil {
			t.Fatalf("pool lost an address to a failed request: %v", err)
		}
	}
	_, err := h.ensure(newSvc("z"))
	if !errors.Is(err, ipam.ErrPoolExhausted) || !strings.Contains(err.Error(), "default") {
		t.Fatalf("third service: %v, want pool default exhausted", err)
	}
}

// TestImpossibleEditKeepsApplying: after an edit that cannot be met, the
// Service keeps its address and everything else of the edit still applies.
func TestImpossibleEditKeepsApplying(t *testing.T) {
	h := startManager(t, newFakeDynamic(), newNode("a", withAddr(v1.NodeInternalIP, "192.0.2.11")))
	h.mustEnsure(newSvc("other"))
	h.mustEnsure(newSvc("web"))

	for _, tt := range []struct {
		name string
		ips  string
		want error
	}{
		{"address outside every pool", "203.0.113.5", ipam.ErrNotInPool},
		{"address taken", "192.0.2.200", ipam.ErrAddressInUse},
	} {
		t.Run(tt.name, func(t *testing.T) {
			edited := newSvc("web", withAnnotation(annotation.LoadBalancerIPs, tt.ips), func(s *v1.Service) {
				s.Spec.LoadBalancerSourceRanges = []string{"198.51.100.0/24"}
				s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
				s.Spec.HealthCheckNodePort = 32001
				s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
				s.Spec.Ports[0].NodePort = 31080
				s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "https", Protocol: v1.ProtocolTCP, Port: 443, NodePort: 30443})
			})
			if _, err := h.ensure(edited); !errors.Is(err, tt.want) {
				t.Fatalf("Ensure = %v, want %v", err, tt.want)
			}
			spec := h.object("web").Spec
			want := v1alpha1.LoadBalancerSpec{
				Addresses: []string{"192.0.2.201"}, Pool: "default",
				Ports:                 []v1alpha1.Port{{Name: "http", Protocol: "TCP", Port: 80, NodePort: 31080}},
				HealthCheck:           &v1alpha1.HealthCheck{Type: "HTTP", Port: 32001, Path: "/healthz"},
				ExternalTrafficPolicy: "Local", SessionAffinity: "ClientIP",
				SourceRanges: []string{"198.51.100.0/24"}, Forwarding: v1alpha1.ForwardingPassthrough,
			}
			if diff := cmp.Diff(want, spec); diff != "" {
				t.Errorf("spec after an impossible edit (-want +got):\n%s", diff)
			}
			if st, exists, _ := h.m.Get(h.ctx, edited); !exists || st.Ingress[0].IP != "192.0.2.201" {
				t.Errorf("Get = %+v, %v; want the held 192.0.2.201", st, exists)
			}
		})
	}

	// Fixed: the new port is assigned and written.
	fixed := newSvc("web", func(s *v1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "https", Protocol: v1.ProtocolTCP, Port: 443, NodePort: 30443})
	})
	h.mustEnsure(fixed)
	if got := PortsSummary(&h.object("web").Spec); got != "80/TCP,443/TCP" {
		t.Errorf("ports after the fix: %s", got)
	}
}

// TestSourceRangesFailClosed: the standard annotation is honoured, and a
// Service whose ranges turn unusable keeps its address but accepts no one.
func TestSourceRangesFailClosed(t *testing.T) {
	h := startManager(t, newFakeDynamic())
	h.mustEnsure(newSvc("web", withAnnotation(v1.AnnotationLoadBalancerSourceRangesKey, "198.51.100.0/24")))
	if got := h.object("web").Spec.SourceRanges; !cmp.Equal(got, []string{"198.51.100.0/24"}) {
		t.Errorf("source ranges from the annotation = %v", got)
	}
	_, err := h.ensure(newSvc("web", withAnnotation(v1.AnnotationLoadBalancerSourceRangesKey, "198.51.100.0/24,bogus")))
	if !errors.Is(err, ErrSourceRanges) || !strings.Contains(err.Error(), `"bogus"`) {
		t.Fatalf("Ensure = %v, want ErrSourceRanges naming the entry", err)
	}
	spec := h.object("web").Spec
	if !cmp.Equal(spec.SourceRanges, DenyAllSourceRanges) || spec.Addresses[0] != "192.0.2.200" {
		t.Errorf("after a bad entry: source ranges %v, addresses %v; want DenyAllSourceRanges on 192.0.2.200", spec.SourceRanges, spec.Addresses)
	}
	h.mustEnsure(newSvc("web"))
	if got := h.object("web").Spec.SourceRanges; got != nil {
		t.Errorf("source ranges once removed = %v, want none", got)
	}
}

func TestRestartRebuildsAllocator(t *testing.T) {
	dyn := newFakeDynamic()
	h := startManager(t, dyn)
	h.mustEnsure(newSvc("web"))
	waitCached(t, h.m, 1)

	// A new manager over the same objects, as after a restart.
	dyn.ClearActions()
	h2 := startManager(t, dyn)
	st, err := h2.ensure(newSvc("web"))
	if err != nil || st.Ingress[0].IP != "192.0.2.200" {
		t.Fatalf("re-ensure after restart = %+v, %v; want 192.0.2.200", st, err)
	}
	st, err = h2.ensure(newSvc("other"))
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
	m := NewManager(newFakeDynamic(), nil, informers.NewSharedInformerFactory(kubefake.NewClientset(), 0), nil)
	_, err := m.Ensure(context.Background(), newSvc("web"), nil)
	var retry *api.RetryError
	if !errors.As(err, &retry) {
		t.Fatalf("Ensure before the rebuild = %v, want a RetryError", err)
	}
}

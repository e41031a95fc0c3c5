package agent

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/membership"
)

func TestPlanStop(t *testing.T) {
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	tests := []struct {
		name       string
		held       []netip.Addr
		routes     []netip.Addr // advertised to routers that help with graceful restart
		successors map[netip.Addr]string
		forGood    bool
		want       stopPlan
		asked      bool // whether forGood is asked
	}{
		{name: "nothing held", want: stopPlan{clean: true}},
		{name: "every address has a successor: hand over", held: []netip.Addr{a, b},
			successors: map[netip.Addr]string{a: "lb-2", b: "lb-3"}, want: stopPlan{clean: true}},
		{name: "alone, a restart: keep", held: []netip.Addr{a, b}, asked: true,
			want: stopPlan{keep: []netip.Addr{a, b}}},
		{name: "alone, for good: clean", held: []netip.Addr{a, b}, forGood: true, asked: true,
			want: stopPlan{clean: true}},
		{name: "some with a successor: release those, keep the others", held: []netip.Addr{a, b},
			successors: map[netip.Addr]string{b: "lb-2"}, asked: true,
			want: stopPlan{release: []netip.Addr{b}, keep: []netip.Addr{a}}},
		{name: "some with a successor, for good: clean", held: []netip.Addr{a, b},
			successors: map[netip.Addr]string{b: "lb-2"}, forGood: true, asked: true, want: stopPlan{clean: true}},
		{name: "routes another host advertises too: withdraw", routes: []netip.Addr{a, b},
			successors: map[netip.Addr]string{a: "lb-2", b: "lb-3"}, want: stopPlan{clean: true}},
		{name: "routes only this host advertises, a restart: keep them at the routers", routes: []netip.Addr{a, b},
			successors: map[netip.Addr]string{b: "lb-2"}, asked: true,
			want: stopPlan{keepRoutes: []netip.Prefix{netip.MustParsePrefix("192.0.2.1/32")}}},
		{name: "routes only this host advertises, for good: clean", routes: []netip.Addr{a}, forGood: true, asked: true,
			want: stopPlan{clean: true}},
		{name: "an address held, a route kept", held: []netip.Addr{a}, routes: []netip.Addr{b}, asked: true,
			want: stopPlan{keep: []netip.Addr{a}, keepRoutes: []netip.Prefix{netip.MustParsePrefix("192.0.2.2/32")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			asked := false
			succ := func(v netip.Addr) string { return tt.successors[v] }
			got := planStop(tt.held, tt.routes, succ, succ, func() bool {
				asked = true
				return tt.forGood
			})
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(stopPlan{}), cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})); diff != "" {
				t.Errorf("planStop (-want +got):\n%s", diff)
			}
			if asked != tt.asked {
				t.Errorf("asked whether the stop is for good: %v, want %v", asked, tt.asked)
			}
		})
	}
}

func TestStopVerdict(t *testing.T) {
	ds := func(mods ...func(*unstructured.Unstructured)) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apps/v1", "kind": "DaemonSet",
			"metadata": map[string]any{"namespace": "kube-system", "name": "groundcloud-agent"},
			"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
				"nodeSelector": map[string]any{"lb": "true", "kubernetes.io/os": "linux"},
			}}},
		}}
		for _, m := range mods {
			m(u)
		}
		return u
	}
	deleting := func(u *unstructured.Unstructured) {
		now := metav1.Now()
		u.SetDeletionTimestamp(&now)
	}
	node := func(l map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "lb-1", Labels: l}}
	}
	selected := node(map[string]string{"lb": "true", "kubernetes.io/os": "linux", "other": "x"})
	gone := func(res string) error { return apierrors.NewNotFound(schema.GroupResource{Resource: res}, "x") }
	down := errors.New("connection refused")
	tests := []struct {
		name    string
		ds      *unstructured.Unstructured
		dsErr   error
		node    *corev1.Node
		nodeErr error
		want    bool
	}{
		{name: "DaemonSet and Node as they were: a restart", ds: ds(), node: selected, want: false},
		{name: "DaemonSet gone: uninstalled", dsErr: gone("daemonsets"), want: true},
		{name: "DaemonSet being deleted", ds: ds(deleting), node: selected, want: true},
		{name: "Node gone", ds: ds(), nodeErr: gone("nodes"), want: true},
		{name: "Node no longer selected", ds: ds(), node: node(map[string]string{"kubernetes.io/os": "linux"}), want: true},
		{name: "RBAC gone: uninstalled", dsErr: apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "daemonsets"}, "groundcloud-agent", errors.New("no rule")), want: true},
		{name: "ServiceAccount gone: uninstalled", dsErr: apierrors.NewUnauthorized("token"), want: true},
		{name: "apiserver away: a restart", dsErr: down, want: false},
		{name: "Node unreadable: a restart", ds: ds(), nodeErr: down, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, why := stopVerdict("kube-system/groundcloud-agent", "lb-1", tt.ds, tt.dsErr, tt.node, tt.nodeErr)
			if got != tt.want {
				t.Errorf("for good = %v (%s), want %v", got, why, tt.want)
			}
		})
	}
}

func TestParseDaemonSet(t *testing.T) {
	for _, s := range []string{"kube-system", "/x", "x/", "a/b/c"} {
		if _, _, err := parseDaemonSet(s); err == nil {
			t.Errorf("parseDaemonSet(%q): no error", s)
		}
	}
	if ns, n, err := parseDaemonSet("kube-system/groundcloud-agent"); err != nil || ns != "kube-system" || n != "groundcloud-agent" {
		t.Errorf("parseDaemonSet = %q, %q, %v", ns, n, err)
	}
}

// hostInterface stands for the addresses on a host's interface, which
// outlive an agent.
type hostInterface struct {
	mu    sync.Mutex
	addrs []netip.Addr
	log   []string // "add 192.0.2.1", "remove 192.0.2.1"
}

func (h *hostInterface) Set(_ context.Context, want []netip.Addr) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, a := range h.addrs {
		if !slices.Contains(want, a) {
			h.log = append(h.log, "remove "+a.String())
		}
	}
	for _, a := range want {
		if !slices.Contains(h.addrs, a) {
			h.log = append(h.log, "add "+a.String())
		}
	}
	h.addrs = slices.Clone(want)
	return nil
}

func (h *hostInterface) Announce(context.Context) {}

func (h *hostInterface) Present(context.Context) ([]netip.Addr, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.addrs), nil
}

func (h *hostInterface) Cleanup(ctx context.Context) error { return h.Set(ctx, nil) }

func (h *hostInterface) changes() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.log)
}

// stagedMembership is a Membership whose state the test sets: Ready and
// owning every address, or Starting and owning none; successor is the
// host that would take every address over ("" none).
type stagedMembership struct {
	mu        sync.Mutex
	ready     bool
	successor string
}

func (m *stagedMembership) set(ready bool, successor string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ready, m.successor = ready, successor
}

func (m *stagedMembership) Owns(netip.Addr) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ready
}

func (m *stagedMembership) Successor(netip.Addr, bool) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.successor
}

func (m *stagedMembership) Run(ctx context.Context, _ membership.Hooks) error {
	<-ctx.Done()
	return nil
}

func (m *stagedMembership) Observe(membership.Observation) {}

func (m *stagedMembership) Status() membership.Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ready {
		return membership.Status{State: membership.StateReady}
	}
	return membership.Status{State: membership.StateStarting}
}

// TestRestartKeepsAndAdopts: an agent that stops for a restart while no
// other host would take its address leaves it and the data plane in
// place; the next agent holds it from its first sync, although membership
// has not decided yet, and gives it up only when another host would hold
// it. An agent whose address another host takes over, or that stops for
// good, removes everything.
func TestRestartKeepsAndAdopts(t *testing.T) {
	vip := netip.MustParseAddr("192.0.2.1")
	lb := newLB("web", func(lb *v1alpha1.LoadBalancer) { lb.Spec.HealthCheck = nil }, withAddresses(vip.String()))
	tests := []struct {
		name      string
		successor string // of the stopping agent
		forGood   bool
		wantKept  bool
	}{
		{name: "alone, a restart", wantKept: true},
		{name: "alone, for good", forGood: true},
		{name: "another host takes over", successor: "lb-2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ifc := &hostInterface{}
			log := &orderLog{}
			asked := 0
			forGood := func(context.Context) (bool, string) {
				asked++
				return tt.forGood, "test"
			}
			m := &stagedMembership{ready: true}
			a := testAgent(t, Config{DataPlane: &cleanupRecorder{log: log}, Addresses: ifc, Membership: m, ForGood: forGood}, lb.DeepCopy())
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- a.Run(ctx) }()
			waitFor(t, "the address held", func() bool { return slices.Contains(ifc.changes(), "add "+vip.String()) })
			m.set(true, tt.successor)
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			present, _ := ifc.Present(t.Context())
			kept := slices.Contains(present, vip)
			removed := slices.Contains(log.events, "data plane removed")
			if kept != tt.wantKept || removed == tt.wantKept {
				t.Fatalf("after the stop: address kept %v, data plane removed %v; want kept %v", kept, removed, tt.wantKept)
			}
			if tt.successor != "" && asked > 0 {
				t.Errorf("asked the apiserver whether the stop is for good although another host takes over")
			}
			if !tt.wantKept {
				return
			}

			// The next agent: membership starting, no other host.
			next := &stagedMembership{}
			b := testAgent(t, Config{DataPlane: &recordingDataPlane{}, Addresses: ifc, Membership: next}, lb.DeepCopy())
			startInformer(t, b)
			b.adoptPresent(t.Context())
			if err := b.sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := ifc.changes(); !slices.Equal(got, []string{"add " + vip.String()}) {
				t.Errorf("the next agent's first sync changed the interface: %v, want it to adopt %s as it is", got[1:], vip)
			}
			next.set(false, "lb-2")
			if err := b.sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			if present, _ := ifc.Present(t.Context()); len(present) > 0 {
				t.Errorf("the next agent holds %v although another host would hold it, want it released", present)
			}
		})
	}
}

// restartingSpeaker stands for a BGP speaker whose router helps with
// graceful restart: it records what the agent asks of it.
type restartingSpeaker struct {
	recordingAnnouncer
	log        *orderLog
	mu         sync.Mutex
	restarting []netip.Prefix
	kept       []netip.Prefix
}

func (s *restartingSpeaker) GracefulRestart() bool { return true }

func (s *restartingSpeaker) Restarting(want []netip.Prefix) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.restarting = want
	s.log.add("restarting")
}

func (s *restartingSpeaker) Keep(p []netip.Prefix) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kept = p
	s.log.add("keep")
}

func (s *restartingSpeaker) Run(ctx context.Context) error {
	s.log.add("speaker running")
	<-ctx.Done()
	s.log.add("speaker stopped")
	return nil
}

// TestGracefulRestartOfRoutes: an agent whose LoadBalancer status says
// this host alone advertised an address starts its speaker as a
// restarting one for it; stopping for a restart, with no other host to advertise the
// address, it leaves the route at the routers (Keep) and its data plane
// in place; stopping for good, or while the status says another host
// advertises the address, it keeps nothing and removes the data plane.
func TestGracefulRestartOfRoutes(t *testing.T) {
	noCheck := func(lb *v1alpha1.LoadBalancer) { lb.Spec.HealthCheck = nil }
	announced := func(lb *v1alpha1.LoadBalancer) {
		lb.Status.Hosts = append(lb.Status.Hosts, v1alpha1.HostStatus{Name: "lb-1", Announcing: []string{"192.0.2.2"}})
	}
	alsoLB2 := func(lb *v1alpha1.LoadBalancer) {
		lb.Status.Hosts = append(lb.Status.Hosts, v1alpha1.HostStatus{Name: "lb-2", Announcing: []string{"192.0.2.2"}})
	}
	for _, tt := range []struct {
		name     string
		forGood  bool
		other    bool // lb-2 advertises the address too
		wantLog  []string
		wantKept []netip.Prefix
	}{
		{name: "a restart", wantLog: []string{"restarting", "speaker running", "keep", "speaker stopped"},
			wantKept: []netip.Prefix{netip.MustParsePrefix("192.0.2.2/32")}},
		{name: "for good", forGood: true, wantLog: []string{"restarting", "speaker running", "speaker stopped", "data plane removed"}},
		{name: "a restart, another host advertises the address", other: true,
			wantLog: []string{"speaker running", "speaker stopped", "data plane removed"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			log := &orderLog{}
			sp := &restartingSpeaker{log: log}
			forGood := func(context.Context) (bool, string) { return tt.forGood, "test" }
			lb := newLB("ecmp", noCheck, announced, withAddresses("192.0.2.2"), withAnnounce(v1alpha1.AnnounceBGP, ""),
				withForwarding(v1alpha1.ForwardingPassthrough))
			if tt.other {
				alsoLB2(lb)
			}
			a := testAgent(t, Config{DataPlane: &cleanupRecorder{log: log}, Announcer: sp, BGP: sp, ForGood: forGood}, lb)
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- a.Run(ctx) }()
			waitFor(t, "the route advertised", func() bool { return slices.Equal(sp.prefixes(), []string{"192.0.2.2/32"}) })
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantLog, log.events); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			want := []netip.Prefix{netip.MustParsePrefix("192.0.2.2/32")}
			if tt.other {
				want = nil // the routers hold no stale route of this host's alone
			}
			if diff := cmp.Diff(want, sp.restarting, cmpopts.EquateComparable(netip.Prefix{})); diff != "" {
				t.Errorf("restarting with (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantKept, sp.kept, cmpopts.EquateComparable(netip.Prefix{})); diff != "" {
				t.Errorf("kept (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHandOverRoutes: of the addresses this host is the elected advertiser
// of, those another host advertises next are handed over (withdrawn last);
// one with no successor is not (it is kept or withdrawn as planStop says).
func TestHandOverRoutes(t *testing.T) {
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::2")
	succ := map[netip.Addr]string{b: "lb-2"}
	got := handOverRoutes([]netip.Addr{a, b}, func(v netip.Addr) string { return succ[v] })
	if want := []netip.Prefix{netip.MustParsePrefix("2001:db8::2/128")}; !slices.Equal(got, want) {
		t.Errorf("handOverRoutes = %v, want %v", got, want)
	}
}

package agent

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	cloudapi "k8s.io/cloud-provider/api"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/backends"
	"github.com/groundcloud/groundcloud/internal/dataplane"
	"github.com/groundcloud/groundcloud/internal/health"
)

func newLB(name string, mods ...func(*v1alpha1.LoadBalancer)) *v1alpha1.LoadBalancer {
	lb := &v1alpha1.LoadBalancer{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Generation: 3},
		Spec: v1alpha1.LoadBalancerSpec{
			Addresses:             []string{"192.0.2.200"},
			Ports:                 []v1alpha1.Port{{Name: "http", Protocol: "TCP", Port: 80, NodePort: 30080}},
			HealthCheck:           &v1alpha1.HealthCheck{Port: 10256, Path: "/healthz"},
			ExternalTrafficPolicy: "Cluster",
			SessionAffinity:       "None",
		},
	}
	for _, m := range mods {
		m(lb)
	}
	return lb
}

var (
	a11 = netip.MustParseAddr("192.0.2.11")
	a12 = netip.MustParseAddr("192.0.2.12")
)

// testNodes are the backends of the tests' LoadBalancers: node-1 (IPv4 and
// IPv6) and node-2 (IPv4), and extra.
func testNodes(extra ...backends.Backend) []backends.Backend {
	return append([]backends.Backend{
		{Name: "node-1", Addrs: []netip.Addr{a11, netip.MustParseAddr("2001:db8::11")}},
		{Name: "node-2", Addrs: []netip.Addr{a12}},
	}, extra...)
}

// node is a backend named name with addresses addrs.
func node(name string, addrs ...string) backends.Backend {
	b := backends.Backend{Name: name}
	for _, a := range addrs {
		b.Addrs = append(b.Addrs, netip.MustParseAddr(a))
	}
	return b
}

// allHealthyBut says down is unhealthy and every other target healthy.
func allHealthyBut(down health.Target) func(health.Target) health.State {
	return func(t health.Target) health.State {
		if t == down {
			return health.Unhealthy
		}
		return health.Healthy
	}
}

func TestTranslate(t *testing.T) {
	lbs := []*v1alpha1.LoadBalancer{
		newLB("web"),
		newLB("dns", func(lb *v1alpha1.LoadBalancer) {
			lb.Spec.Addresses = []string{"192.0.2.201", "2001:db8::c9"}
			lb.Spec.Ports = []v1alpha1.Port{{Protocol: "UDP", Port: 53, NodePort: 30053}}
			lb.Spec.SessionAffinity = "ClientIP"
			lb.Spec.SourceRanges = []string{"198.51.100.0/24"}
			lb.Spec.HealthCheck = &v1alpha1.HealthCheck{Port: 32001, Path: "/healthz"}
			lb.Spec.ExternalTrafficPolicy = "Local"
		}),
	}
	down := health.Target{Addr: a12, Port: 10256, Path: "/healthz"}
	plan := Translate(lbs, testNodes(), Host{}, allHealthyBut(down))

	want := Plan{
		State: dataplane.State{Services: []dataplane.Service{
			{
				Name:     "default/dns",
				VIPs:     []netip.Addr{netip.MustParseAddr("192.0.2.201"), netip.MustParseAddr("2001:db8::c9")},
				Ports:    []dataplane.Port{{Protocol: dataplane.UDP, Port: 53, NodePort: 30053}},
				Affinity: true,
				Backends: []dataplane.Backend{
					{Node: "node-1", Addrs: []netip.Addr{a11, netip.MustParseAddr("2001:db8::11")}, Healthy: true},
					{Node: "node-2", Addrs: []netip.Addr{a12}, Healthy: true},
				},
				SourceRanges: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")},
			},
			{
				Name:  "default/web",
				VIPs:  []netip.Addr{netip.MustParseAddr("192.0.2.200")},
				Ports: []dataplane.Port{{Name: "http", Protocol: dataplane.TCP, Port: 80, NodePort: 30080}},
				Backends: []dataplane.Backend{
					{Node: "node-1", Addrs: []netip.Addr{a11, netip.MustParseAddr("2001:db8::11")}, Healthy: true},
					{Node: "node-2", Addrs: []netip.Addr{a12}, Healthy: false},
				},
				BucketGroup: "http:10256/healthz", // Cluster: the check every such LoadBalancer shares
			},
		}},
		Targets: []health.Target{
			{Addr: a11, Port: 10256, Path: "/healthz"},
			{Addr: a11, Port: 32001, Path: "/healthz"},
			{Addr: a12, Port: 10256, Path: "/healthz"},
			{Addr: a12, Port: 32001, Path: "/healthz"},
		},
		VIPs: []netip.Addr{netip.MustParseAddr("192.0.2.200"), netip.MustParseAddr("192.0.2.201"), netip.MustParseAddr("2001:db8::c9")},
	}
	if diff := cmp.Diff(want, plan, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("Translate (-want +got):\n%s", diff)
	}
}

func TestDesiredStatus(t *testing.T) {
	now := metav1.NewTime(time.Unix(1000, 0))
	later := metav1.NewTime(time.Unix(2000, 0))
	vip := netip.MustParseAddr("192.0.2.200")
	lb := newLB("web")

	st, changed := desiredStatus(lb, hostReport{Host: "lb-1", Programmed: true, Message: "ok", Held: []netip.Addr{vip}}, now)
	if !changed {
		t.Fatal("first report not a change")
	}
	if st.ObservedGeneration != 3 || len(st.Conditions) != 1 || st.Conditions[0].Type != v1alpha1.ConditionReady ||
		st.Conditions[0].Status != metav1.ConditionTrue || len(st.Addresses) != 1 || st.Addresses[0].Host != "lb-1" ||
		len(st.Hosts) != 1 || st.Hosts[0].Conditions[0].Type != v1alpha1.ConditionProgrammed {
		t.Fatalf("status = %+v", st)
	}

	// Once stored, the same report is no change, and keeps its times.
	lb.Status = st
	st2, changed := desiredStatus(lb, hostReport{Host: "lb-1", Programmed: true, Message: "ok", Held: []netip.Addr{vip}}, later)
	if changed {
		t.Errorf("unchanged report is a change: %+v", st2)
	}
	if !st2.Conditions[0].LastTransitionTime.Equal(&now) {
		t.Errorf("lastTransitionTime moved without a transition")
	}

	// A new generation is a change.
	lb.Generation = 4
	if _, changed := desiredStatus(lb, hostReport{Host: "lb-1", Programmed: true, Message: "ok", Held: []netip.Addr{vip}}, later); !changed {
		t.Error("new generation is not a change")
	}
	lb.Generation = 3

	// Losing the address is a change, and the report no longer claims Ready.
	st3, changed := desiredStatus(lb, hostReport{Host: "lb-1", Programmed: true, Message: "ok"}, later)
	if !changed || len(st3.Addresses) != 0 || len(st3.Conditions) != 0 {
		t.Errorf("report without the address: changed=%v %+v", changed, st3)
	}

	// A failed sync flips Programmed and Ready with a new transition time.
	st4, changed := desiredStatus(lb, hostReport{Host: "lb-1", Programmed: false, Message: "nft failed", Held: []netip.Addr{vip}}, later)
	if !changed || st4.Conditions[0].Status != metav1.ConditionFalse || !st4.Conditions[0].LastTransitionTime.Equal(&later) {
		t.Errorf("failed sync: changed=%v %+v", changed, st4)
	}
}

func TestTranslateSharesBackendLists(t *testing.T) {
	noCheck := func(lb *v1alpha1.LoadBalancer) { lb.Spec.HealthCheck = nil }
	otherCheck := func(lb *v1alpha1.LoadBalancer) {
		lb.Spec.HealthCheck = &v1alpha1.HealthCheck{Port: 31000, Path: "/healthz"}
	}
	down := health.Target{Addr: a12, Port: 31000, Path: "/healthz"}
	p := Translate([]*v1alpha1.LoadBalancer{
		newLB("a", noCheck), newLB("b", noCheck), newLB("d"), newLB("e"), newLB("f", otherCheck),
	}, testNodes(), Host{}, allHealthyBut(down))
	s := p.State.Services
	if &s[0].Backends[0] != &s[1].Backends[0] || &s[2].Backends[0] != &s[3].Backends[0] {
		t.Error("backend lists with equal health checks are not shared")
	}
	if &s[2].Backends[0] == &s[0].Backends[0] || &s[4].Backends[0] == &s[2].Backends[0] {
		t.Error("backend lists with different health checks were shared")
	}
	if !s[2].Backends[1].Healthy || s[4].Backends[1].Healthy {
		t.Errorf("health of node-2: %v with the shared check, %v with its own; want true, false", s[2].Backends[1].Healthy, s[4].Backends[1].Healthy)
	}
	if len(p.Targets) != 4 {
		t.Errorf("targets = %v, want node-1 and node-2 on 10256 and on 31000", p.Targets)
	}
}

// A backend whose target is not probed yet gets no new flows while another
// backend of its LoadBalancer is healthy; when none is, the unknown ones
// do (the unhealthy ones never).
func TestTranslateUnknownBackends(t *testing.T) {
	a13 := netip.MustParseAddr("192.0.2.13")
	tests := []struct {
		name   string
		states map[netip.Addr]health.State // missing: Unknown
		want   []bool                      // node-1, node-2, node-3
	}{
		{name: "all unknown", want: []bool{true, true, true}},
		{name: "one healthy", states: map[netip.Addr]health.State{a12: health.Healthy}, want: []bool{false, true, false}},
		{name: "one unhealthy", states: map[netip.Addr]health.State{a12: health.Unhealthy}, want: []bool{true, false, true}},
		{name: "one healthy, one unhealthy", states: map[netip.Addr]health.State{a11: health.Unhealthy, a12: health.Healthy}, want: []bool{false, true, false}},
		{name: "all known", states: map[netip.Addr]health.State{a11: health.Unhealthy, a12: health.Healthy, a13: health.Unhealthy}, want: []bool{false, true, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Translate([]*v1alpha1.LoadBalancer{newLB("local")}, testNodes(node("node-3", "192.0.2.13")), Host{}, func(tg health.Target) health.State { return tt.states[tg.Addr] })
			var got []bool
			for _, b := range p.State.Services[0].Backends {
				got = append(got, b.Healthy)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("backends healthy (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTranslateOwnNode: on a load-balancer host that is Node node-1 the
// plan names it, and a LoadBalancer whose only healthy backend is node-1 is
// a problem this host reports (proxy forwarding cannot serve it); with
// node-2 healthy too it is not.
func TestTranslateOwnNode(t *testing.T) {
	p := Translate([]*v1alpha1.LoadBalancer{newLB("both"), newLB("own", withAddresses("192.0.2.201"))}, testNodes(), Host{Node: "node-1"},
		func(tg health.Target) health.State {
			if tg.Addr == a12 {
				return health.Unhealthy
			}
			return health.Healthy
		})
	if p.State.Self != "node-1" {
		t.Errorf("State.Self = %q, want node-1", p.State.Self)
	}
	want := map[string]Problems{
		"default/both": {OwnNodeOnly: true, Messages: []string{"the only healthy backend is this load-balancer host's own node node-1, " +
			"which proxy forwarding cannot reach through its own NodePort: add another node or use passthrough forwarding"}},
	}
	want["default/own"] = want["default/both"] // the same backends
	if diff := cmp.Diff(want, p.Problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	p = Translate([]*v1alpha1.LoadBalancer{newLB("both")}, testNodes(), Host{Node: "node-1"}, allHealthyBut(health.Target{}))
	if p.Problems != nil {
		t.Errorf("problems with node-2 healthy: %v", p.Problems)
	}
	if ok, reason, _ := (hostReport{Programmed: true, Problems: want["default/own"]}).outcome(); ok || reason != ReasonOwnNodeOnly {
		t.Errorf("outcome = %t, %s; want false, %s", ok, reason, ReasonOwnNodeOnly)
	}
}

// TestTranslateTCPHealthCheck: a TCP health check probes a connection to
// the port of each backend; an HTTP check of the same port is another
// target.
func TestTranslateTCPHealthCheck(t *testing.T) {
	tcpCheck := func(lb *v1alpha1.LoadBalancer) {
		lb.Spec.HealthCheck = &v1alpha1.HealthCheck{Type: v1alpha1.HealthCheckTCP, Port: 30080}
	}
	down := health.Target{Addr: a12, Port: 30080, TCP: true}
	p := Translate([]*v1alpha1.LoadBalancer{newLB("a", tcpCheck)}, testNodes(), Host{}, allHealthyBut(down))
	for _, target := range p.Targets {
		if !target.TCP || target.Port != 30080 || target.Path != "" {
			t.Errorf("target %s, want TCP to port 30080", target)
		}
	}
	if b := p.State.Services[0].Backends; len(b) != 2 || !b[0].Healthy || b[1].Healthy {
		t.Errorf("backends %+v, want node-2 (its TCP target down) unhealthy", b)
	}
}

func passthrough(lb *v1alpha1.LoadBalancer) { lb.Spec.Forwarding = v1alpha1.ForwardingPassthrough }

// TestTranslatePassthrough: spec.forwarding selects the data plane's
// forwarding; the host's interface and links go to the data plane; a node
// off those links is a problem naming it (NodeNotOnLink), and this host's
// own node as the only healthy backend is not one (its kube-proxy serves
// it).
func TestTranslatePassthrough(t *testing.T) {
	host := Host{Node: "node-1", Interface: "eth0", Links: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/28"), netip.MustParsePrefix("2001:db8::/64")}}
	onlyOwn := func(tg health.Target) health.State {
		if tg.Addr == a12 {
			return health.Unhealthy
		}
		return health.Healthy
	}
	p := Translate([]*v1alpha1.LoadBalancer{newLB("web", passthrough), newLB("old", withAddresses("192.0.2.201"))}, testNodes(), host, onlyOwn)
	if p.State.Interface != "eth0" || len(p.State.Links) != 2 {
		t.Errorf("State interface %q links %v, want eth0 and the host's links", p.State.Interface, p.State.Links)
	}
	fwd := map[string]dataplane.Forwarding{}
	for _, s := range p.State.Services {
		fwd[s.Name] = s.Forwarding
	}
	if diff := cmp.Diff(map[string]dataplane.Forwarding{"default/web": dataplane.Passthrough, "default/old": ""}, fwd); diff != "" {
		t.Errorf("forwarding (-want +got):\n%s", diff)
	}
	if p.Problems["default/web"].OwnNodeOnly || !p.Problems["default/old"].OwnNodeOnly {
		t.Errorf("OwnNodeOnly must concern proxy forwarding only: %+v", p.Problems)
	}

	p = Translate([]*v1alpha1.LoadBalancer{newLB("web", passthrough)}, testNodes(node("node-9", "198.51.100.9")), host, allHealthyBut(health.Target{}))
	got := p.Problems["default/web"]
	want := Problems{OffLink: []string{"node-9"}, Messages: []string{
		`backend "node-9": address 198.51.100.9 is on no link of interface eth0, so passthrough forwarding cannot reach it; it gets no flows`}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	if ok, reason, msg := (hostReport{Programmed: true, Problems: got}).outcome(); ok || reason != ReasonNodeNotOnLink {
		t.Errorf("outcome = %t, %s, %q; want false, %s", ok, reason, msg, ReasonNodeNotOnLink)
	}
}

// TestTranslateRouted: the addresses of a BGP LoadBalancer are routed to
// the host, never held on its interface, whether this host's labels select
// its pool or not; the data plane is told so (dataplane.Service.Routed).
func TestTranslateRouted(t *testing.T) {
	p := Translate([]*v1alpha1.LoadBalancer{
		newLB("l2", withAddresses("192.0.2.1")),
		newLB("l2-edge", withAddresses("192.0.2.2"), withAnnounce(v1alpha1.AnnounceL2, "edge=true")),
		newLB("bgp-proxy", withAddresses("192.0.2.3"), withAnnounce(v1alpha1.AnnounceBGP, "")),
		newLB("bgp-ecmp", withAddresses("192.0.2.4"), withAnnounce(v1alpha1.AnnounceBGP, ""), passthrough),
		newLB("bgp-elsewhere", withAddresses("192.0.2.5"), withAnnounce(v1alpha1.AnnounceBGP, "rack=b")),
	}, testNodes(), Host{}, allHealthyBut(health.Target{}))
	got := map[string]bool{}
	for _, s := range p.State.Services {
		got[s.Name] = s.Routed
	}
	want := map[string]bool{"default/l2": false, "default/l2-edge": false, "default/bgp-proxy": true, "default/bgp-ecmp": true, "default/bgp-elsewhere": true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("routed (-want +got):\n%s", diff)
	}
}

// TestIsBackend: the Node events that may change a load balancer.
func TestIsBackend(t *testing.T) {
	backend := nodeObjects(node("node-1", "192.0.2.11"))[0].(*corev1.Node)
	tainted := backend.DeepCopy()
	tainted.Spec.Taints = []corev1.Taint{{Key: cloudapi.TaintExternalCloudProvider, Effect: corev1.TaintEffectNoSchedule}}
	routed := backend.DeepCopy()
	routed.Status.Conditions = []corev1.NodeCondition{{Type: backends.ConditionPodRoutes, Status: corev1.ConditionTrue}}
	for _, tc := range []struct {
		name  string
		rules backends.Rules
		obj   any
		want  bool
	}{
		{name: "a backend", obj: backend, want: true},
		{name: "a node not initialised yet", obj: tainted},
		{name: "the tombstone of a backend", obj: cache.DeletedFinalStateUnknown{Key: "node-1", Obj: backend}, want: true},
		{name: "the tombstone of another node", obj: cache.DeletedFinalStateUnknown{Key: "node-1", Obj: tainted}},
		{name: "a tombstone without its object", obj: cache.DeletedFinalStateUnknown{Key: "node-1"}, want: true},
		{name: "waiting for pod routes the router has not reported", rules: backends.Rules{WaitForPodRoutes: true}, obj: backend},
		{name: "waiting for pod routes the router reported", rules: backends.Rules{WaitForPodRoutes: true}, obj: routed, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := isBackend(tc.rules, tc.obj); got != tc.want {
				t.Errorf("isBackend = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestBucketGroup(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*v1alpha1.LoadBalancer)
		want string
	}{
		{"Cluster, HTTP check", func(lb *v1alpha1.LoadBalancer) {
			lb.Spec.HealthCheck = &v1alpha1.HealthCheck{Type: v1alpha1.HealthCheckHTTP, Port: 10256, Path: "/healthz"}
		}, "http:10256/healthz"},
		{"Cluster, TCP check", func(lb *v1alpha1.LoadBalancer) {
			lb.Spec.HealthCheck = &v1alpha1.HealthCheck{Type: v1alpha1.HealthCheckTCP, Port: 30080}
		}, "tcp:30080"},
		{"Cluster, no check", func(lb *v1alpha1.LoadBalancer) { lb.Spec.HealthCheck = nil }, "unchecked"},
		{"Local: its own check, its own map", func(lb *v1alpha1.LoadBalancer) {
			lb.Spec.ExternalTrafficPolicy = "Local"
			lb.Spec.HealthCheck = &v1alpha1.HealthCheck{Port: 32001, Path: "/healthz"}
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := bucketGroup(newLB("web", tc.mod)); got != tc.want {
				t.Errorf("bucketGroup = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestTranslateMemoMatches: the agent's memo of translated LoadBalancers
// never changes a plan, across syncs with the same objects, an object
// replaced by a changed one, one deleted, health changing, and problems
// (which must not pile up from one sync to the next); and it forgets the
// objects a sync no longer lists.
func TestTranslateMemoMatches(t *testing.T) {
	m := &translateMemo{}
	open := newLB("open", withAddresses("192.0.2.201"), func(lb *v1alpha1.LoadBalancer) { lb.Spec.SourceRanges = []string{"not-a-cidr"} })
	lbs := []*v1alpha1.LoadBalancer{
		newLB("first"),
		newLB("second"), // the same 192.0.2.200 TCP/80: a conflict
		open,
		newLB("local", withAddresses("192.0.2.202"), func(lb *v1alpha1.LoadBalancer) {
			lb.Spec.ExternalTrafficPolicy = "Local"
			lb.Spec.HealthCheck = &v1alpha1.HealthCheck{Port: 32001, Path: "/healthz"}
		}),
	}
	healthy := func(health.Target) health.State { return health.Healthy }
	node2Down := func(tg health.Target) health.State {
		if tg.Addr == a12 {
			return health.Unhealthy
		}
		return health.Healthy
	}
	moved := *open
	moved.Spec.Addresses = []string{"192.0.2.210"}
	for i, step := range []struct {
		lbs   []*v1alpha1.LoadBalancer
		state func(health.Target) health.State
	}{
		{lbs, healthy},
		{lbs, healthy},
		{lbs, node2Down},
		{[]*v1alpha1.LoadBalancer{lbs[0], lbs[1], &moved, lbs[3]}, node2Down},
		{[]*v1alpha1.LoadBalancer{lbs[0], &moved, lbs[3]}, healthy},
		{[]*v1alpha1.LoadBalancer{lbs[0], &moved, lbs[3]}, healthy},
	} {
		got := m.translate(step.lbs, testNodes(), Host{Node: "node-1"}, step.state)
		want := Translate(step.lbs, testNodes(), Host{Node: "node-1"}, step.state)
		if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
			t.Fatalf("step %d: with the memo (-without +with):\n%s", i, diff)
		}
		if len(m.entries) != len(step.lbs) {
			t.Fatalf("step %d: the memo holds %d objects, want %d", i, len(m.entries), len(step.lbs))
		}
	}
}

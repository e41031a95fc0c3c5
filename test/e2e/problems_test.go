package e2e

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/lbapi"
)

// TestLoadBalancerProblemsInStatus: the agent does not trust what it is
// given. A LoadBalancer whose frontend another one already has, or whose
// address cannot be a virtual IP, is not Ready, and its status says why
// (on Ready and on the host's Programmed condition), written once; the
// LoadBalancer that keeps the frontend is untouched and carries traffic.
// The objects are written with the controller manager's identity, which
// RBAC and the admission policy of deploy/ let write specs: a bug or a
// race there is what the agent guards against.
func TestLoadBalancerProblemsInStatus(t *testing.T) {
	env := startLBEnv(t)
	np := env.nodePort(t)
	env.create(t, newService("web", withPort(v1.ProtocolTCP, 80, np)))
	vip := env.addresses(t, "web", 1)[0]
	eventually(t, "web Ready", func() bool { return env.ready(t, "web") == metav1.ConditionTrue })

	path, err := env.cp.ServiceAccountKubeconfig(t.Context(), "kube-system", "groundcloud-controller-manager")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	writer := lbapi.NewClient(dyn)
	create := func(name, addr string) {
		t.Helper()
		lb := &v1alpha1.LoadBalancer{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: v1alpha1.LoadBalancerSpec{
				Addresses:             []string{addr},
				Ports:                 []v1alpha1.Port{{Name: "http", Protocol: "TCP", Port: 80, NodePort: np}},
				ExternalTrafficPolicy: "Cluster", SessionAffinity: "None",
			},
		}
		if _, err := writer.Create(t.Context(), lb); err != nil {
			t.Fatal(err)
		}
	}
	create("zz-clash", vip.String()) // "default/web" sorts first and keeps 80/TCP
	create("zz-multicast", "224.0.0.9")

	for _, tc := range []struct{ name, reason, text string }{
		{"zz-clash", "Conflict", fmt.Sprintf(`%s TCP/80 is already used by service "default/web"`, vip)},
		{"zz-multicast", "Invalid", "address 224.0.0.9: not usable as a virtual IP"},
	} {
		var lb *v1alpha1.LoadBalancer
		eventually(t, tc.name+" not Ready, reason "+tc.reason, func() bool {
			lb = env.loadBalancer(t, tc.name)
			c := meta.FindStatusCondition(lb.Status.Conditions, v1alpha1.ConditionReady)
			return c != nil && c.Status == metav1.ConditionFalse && c.Reason == tc.reason && strings.Contains(c.Message, tc.text)
		})
		ready := meta.FindStatusCondition(lb.Status.Conditions, v1alpha1.ConditionReady)
		t.Logf("%s: Ready %s %s: %s", tc.name, ready.Status, ready.Reason, ready.Message)
		if len(lb.Status.Hosts) != 1 {
			t.Fatalf("%s: hosts %+v", tc.name, lb.Status.Hosts)
		}
		if c := meta.FindStatusCondition(lb.Status.Hosts[0].Conditions, v1alpha1.ConditionProgrammed); c == nil ||
			c.Status != metav1.ConditionFalse || c.Reason != tc.reason || !strings.Contains(c.Message, tc.text) {
			t.Errorf("%s: Programmed %+v, want False %s naming the problem", tc.name, c, tc.reason)
		}
		// Written once: nothing more while nothing changes.
		rv := lb.ResourceVersion
		time.Sleep(3 * time.Second)
		if again := env.loadBalancer(t, tc.name); again.ResourceVersion != rv {
			t.Errorf("%s written again though nothing changed: %+v", tc.name, again.Status)
		}
	}
	if got := env.ready(t, "web"); got != metav1.ConditionTrue {
		t.Errorf("web Ready %s after the clash, want True", got)
	}
	if h := env.hostsHolding(t, "zz-multicast"); len(h) > 0 {
		t.Errorf("224.0.0.9 held by %v", h)
	}
	env.nodesReached(t, netip.AddrPortFrom(vip, 80), env.nodeNames()...)
}

// loadBalancer reads a LoadBalancer from the API.
func (env *lbEnv) loadBalancer(t *testing.T, name string) *v1alpha1.LoadBalancer {
	t.Helper()
	lb, err := lbapi.NewClient(env.dyn).Get(t.Context(), "default", name)
	if err != nil {
		t.Fatal(err)
	}
	return lb
}

// ready is the status of a LoadBalancer's Ready condition ("" without one).
func (env *lbEnv) ready(t *testing.T, name string) metav1.ConditionStatus {
	t.Helper()
	if c := meta.FindStatusCondition(env.loadBalancer(t, name).Status.Conditions, v1alpha1.ConditionReady); c != nil {
		return c.Status
	}
	return ""
}

// hostsHolding are the hosts a LoadBalancer's status says hold its
// addresses.
func (env *lbEnv) hostsHolding(t *testing.T, name string) []string {
	t.Helper()
	var out []string
	for _, a := range env.loadBalancer(t, name).Status.Addresses {
		out = append(out, a.Host)
	}
	return out
}

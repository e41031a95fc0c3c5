package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/groundcloud/groundcloud/internal/lbapi"
)

// newService builds a LoadBalancer Service in namespace default.
func newService(name string, mods ...func(*v1.Service)) *v1.Service {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1.ServiceSpec{
			Type:     v1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": name},
		},
	}
	for _, m := range mods {
		m(svc)
	}
	return svc
}

func withPort(proto v1.Protocol, port, nodePort int32) func(*v1.Service) {
	return func(s *v1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{
			Name: fmt.Sprintf("%s-%d", strings.ToLower(string(proto)), port), Protocol: proto, Port: port, NodePort: nodePort,
		})
	}
}

func withAnnotation(k, v string) func(*v1.Service) {
	return func(s *v1.Service) {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[k] = v
	}
}

func withDualStack() func(*v1.Service) {
	return func(s *v1.Service) {
		p := v1.IPFamilyPolicyRequireDualStack
		s.Spec.IPFamilyPolicy = &p
		s.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	}
}

func withLocalTraffic(healthPort int32) func(*v1.Service) {
	return func(s *v1.Service) {
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = healthPort
	}
}

func withSourceRanges(r ...string) func(*v1.Service) {
	return func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = r }
}

func (env *lbEnv) create(t *testing.T, svc *v1.Service) {
	t.Helper()
	if _, err := env.client.CoreV1().Services(svc.Namespace).Create(t.Context(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create service %s: %v", svc.Name, err)
	}
}

func (env *lbEnv) delete(t *testing.T, name string) {
	t.Helper()
	if err := env.client.CoreV1().Services("default").Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete service %s: %v", name, err)
	}
}

// addresses waits until the Service has load-balancer addresses and
// returns them.
func (env *lbEnv) addresses(t *testing.T, name string, want int) []netip.Addr {
	t.Helper()
	var out []netip.Addr
	eventually(t, "service "+name+" addresses", func() bool {
		svc, err := env.client.CoreV1().Services("default").Get(t.Context(), name, metav1.GetOptions{})
		if err != nil || len(svc.Status.LoadBalancer.Ingress) < want {
			return false
		}
		out = out[:0]
		for _, ing := range svc.Status.LoadBalancer.Ingress {
			if ing.IPMode == nil || *ing.IPMode != v1.LoadBalancerIPModeProxy {
				t.Errorf("service %s ingress %s has ipMode %v, want Proxy", name, ing.IP, ing.IPMode)
			}
			out = append(out, netip.MustParseAddr(ing.IP))
		}
		return true
	})
	return out
}

// warning waits for a Warning event on the Service whose message contains text.
func (env *lbEnv) warning(t *testing.T, name, text string) {
	t.Helper()
	eventually(t, fmt.Sprintf("warning %q on service %s", text, name), func() bool {
		evs, err := env.client.CoreV1().Events("default").List(t.Context(), metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Service,involvedObject.name=" + name + ",type=Warning",
		})
		if err != nil {
			return false
		}
		for _, e := range evs.Items {
			if strings.Contains(e.Message, text) {
				return true
			}
		}
		return false
	})
}

// nodesReached waits until the set of nodes answering 30 connections from
// the inside client to addr equals want.
func (env *lbEnv) nodesReached(t *testing.T, addr netip.AddrPort, want ...string) {
	t.Helper()
	slices.Sort(want)
	var last map[string]int
	var lastErr error
	eventually(t, fmt.Sprintf("connections to %s reach exactly %v", addr, want), func() bool {
		got, err := spread(t.Context(), env.inside, addr, 30)
		last, lastErr = got, err
		if err != nil {
			return false
		}
		var nodes []string
		for n := range got {
			nodes = append(nodes, n)
		}
		slices.Sort(nodes)
		return slices.Equal(nodes, want)
	})
	t.Logf("%s: %v (last error %v)", addr, last, lastErr)
}

func (env *lbEnv) setUnhealthy(t *testing.T, file string, unhealthy bool) {
	t.Helper()
	path := filepath.Join(env.stateDir, file)
	if unhealthy {
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
}

func (env *lbEnv) nodeNames() []string {
	var out []string
	for _, n := range env.nodes {
		out = append(out, n.Name)
	}
	return out
}

func inPool(a netip.Addr) bool {
	r4 := [2]netip.Addr{netip.MustParseAddr("192.0.2.200"), netip.MustParseAddr("192.0.2.219")}
	r6 := [2]netip.Addr{netip.MustParseAddr("2001:db8:0:1::c8"), netip.MustParseAddr("2001:db8:0:1::db")}
	for _, r := range [][2]netip.Addr{r4, r6} {
		if a.Compare(r[0]) >= 0 && a.Compare(r[1]) <= 0 {
			return true
		}
	}
	return false
}

func (env *lbEnv) lbObjectExists(t *testing.T, name string) bool {
	t.Helper()
	return lbExists(t, env.dyn, name)
}

// lbExists reports whether the LoadBalancer default/name exists.
func lbExists(t *testing.T, dyn dynamic.Interface, name string) bool {
	t.Helper()
	_, err := dyn.Resource(lbapi.Resource).Namespace("default").Get(t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

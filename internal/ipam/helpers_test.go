package ipam

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/groundcloud/groundcloud/internal/annotation"
	"github.com/groundcloud/groundcloud/internal/config"
)

// addrCmp lets go-cmp compare netip.Addr, which has unexported fields.
var addrCmp = cmp.Comparer(func(a, b netip.Addr) bool { return a == b })

func newService(name string, mods ...func(*v1.Service)) *v1.Service {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer},
	}
	for _, m := range mods {
		m(svc)
	}
	return svc
}

func inNamespace(ns string) func(*v1.Service) {
	return func(s *v1.Service) { s.Namespace = ns }
}

// withPorts adds ports written "TCP/80".
func withPorts(ports ...string) func(*v1.Service) {
	return func(s *v1.Service) {
		for _, p := range ports {
			proto, num, _ := strings.Cut(p, "/")
			n, err := strconv.Atoi(num)
			if err != nil {
				panic(fmt.Sprintf("bad port %q", p))
			}
			s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Protocol: v1.Protocol(proto), Port: int32(n)})
		}
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

func withPool(name string) func(*v1.Service) { return withAnnotation(annotation.Pool, name) }
func withIPs(ips string) func(*v1.Service)   { return withAnnotation(annotation.LoadBalancerIPs, ips) }
func withSharing(k string) func(*v1.Service) { return withAnnotation(annotation.AllowSharedIP, k) }

func withFamilies(policy v1.IPFamilyPolicy, fams ...v1.IPFamily) func(*v1.Service) {
	return func(s *v1.Service) {
		s.Spec.IPFamilyPolicy = &policy
		s.Spec.IPFamilies = fams
	}
}

func withLoadBalancerIP(ip string) func(*v1.Service) {
	return func(s *v1.Service) { s.Spec.LoadBalancerIP = ip }
}

const (
	v4 = v1.IPv4Protocol
	v6 = v1.IPv6Protocol

	single  = v1.IPFamilyPolicySingleStack
	prefer  = v1.IPFamilyPolicyPreferDualStack
	require = v1.IPFamilyPolicyRequireDualStack
)

// newPool returns an auto-assign pool of the given ranges ("10.0.0.0/30",
// "10.0.0.5-10.0.0.9").
func newPool(name string, ranges []string, mods ...func(*config.Pool)) *config.Pool {
	p := &config.Pool{Name: name, AutoAssign: true}
	for _, r := range ranges {
		ar, err := config.ParseAddrRange(r)
		if err != nil {
			panic(err)
		}
		p.Ranges = append(p.Ranges, ar)
	}
	for _, m := range mods {
		m(p)
	}
	return p
}

func ranges(r ...string) []string { return r }

func manual() func(*config.Pool) { return func(p *config.Pool) { p.AutoAssign = false } }

func crossNamespace() func(*config.Pool) {
	return func(p *config.Pool) { p.AllowCrossNamespaceSharing = true }
}

func namespaces(ns ...string) func(*config.Pool) {
	return func(p *config.Pool) { p.Namespaces = ns }
}

func key(s string) types.NamespacedName {
	ns, name, ok := strings.Cut(s, "/")
	if !ok {
		return types.NamespacedName{Namespace: "default", Name: s}
	}
	return types.NamespacedName{Namespace: ns, Name: name}
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func alloc(pool string, ss ...string) Allocation {
	return Allocation{Pool: pool, Addresses: addrs(ss...)}
}

func mustRequest(t testing.TB, svc *v1.Service) Request {
	t.Helper()
	req, err := RequestFromService(svc)
	if err != nil {
		t.Fatalf("RequestFromService(%s): %v", svc.Name, err)
	}
	return req
}

func mustAssign(t testing.TB, a *Allocator, svc *v1.Service) Allocation {
	t.Helper()
	got, err := a.Assign(mustRequest(t, svc))
	if err != nil {
		t.Fatalf("Assign(%s): %v", svc.Name, err)
	}
	return got
}

func withForwarding(f string) func(*v1.Service) { return withAnnotation(annotation.Forwarding, f) }

func forwarding(f config.Forwarding) func(*config.Pool) {
	return func(p *config.Pool) { p.Forwarding = f }
}

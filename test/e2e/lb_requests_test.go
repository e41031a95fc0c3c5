package e2e

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/groundcloud/groundcloud/internal/annotation"
	"github.com/groundcloud/groundcloud/internal/lbapi"
)

// TestLoadBalancerRecovery covers what goes wrong around a LoadBalancer
// object and a Service's request: an object deleted by hand, a write the
// apiserver refuses, requests over the object's limits, source ranges
// given by the standard annotation or unusable, and an edit that cannot be
// met. The subtests share one environment and run in order.
func TestLoadBalancerRecovery(t *testing.T) {
	env := startLBEnv(t)
	ctx := t.Context()
	all := env.nodeNames()
	lbs := env.dyn.Resource(lbapi.Resource).Namespace("default")

	t.Run("a LoadBalancer deleted or edited by hand comes back", func(t *testing.T) {
		env.create(t, newService("web", withPort(v1.ProtocolTCP, 80, env.nodePort(t))))
		vip := env.addresses(t, "web", 1)[0]
		env.nodesReached(t, netip.AddrPortFrom(vip, 80), all...)
		if out, err := env.cp.Kubectl(ctx, "delete", "loadbalancer", "-n", "default", "web"); err != nil {
			t.Fatalf("kubectl delete loadbalancer web: %v\n%s", err, out)
		}
		eventually(t, "LoadBalancer web back with "+vip.String(), func() bool {
			u, err := lbs.Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return false
			}
			lb, err := lbapi.Type.FromUnstructured(u)
			return err == nil && len(lb.Spec.Addresses) == 1 && lb.Spec.Addresses[0] == vip.String()
		})
		env.nodesReached(t, netip.AddrPortFrom(vip, 80), all...)

		// One edited by hand is written back.
		if _, err := lbs.Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"sessionAffinity":"ClientIP"}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "LoadBalancer web's session affinity written back", func() bool {
			u, err := lbs.Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return false
			}
			lb, err := lbapi.Type.FromUnstructured(u)
			return err == nil && lb.Spec.SessionAffinity == "None"
		})
		env.nodesReached(t, netip.AddrPortFrom(vip, 80), all...)
	})

	t.Run("a write the apiserver refuses strands no address", func(t *testing.T) {
		refuseCreate(t, env, "doomed")
		env.create(t, newService("doomed", withPort(v1.ProtocolTCP, 80, env.nodePort(t)), withAnnotation(annotation.LoadBalancerIPs, "192.0.2.210")))
		env.warning(t, "doomed", "refused by this test")
		env.delete(t, "doomed")
		eventually(t, "service doomed gone", func() bool {
			_, err := env.client.CoreV1().Services("default").Get(ctx, "doomed", metav1.GetOptions{})
			return err != nil
		})
		env.create(t, newService("heir", withPort(v1.ProtocolTCP, 80, env.nodePort(t)), withAnnotation(annotation.LoadBalancerIPs, "192.0.2.210")))
		if got := env.addresses(t, "heir", 1)[0]; got != netip.MustParseAddr("192.0.2.210") {
			t.Fatalf("heir got %s, want 192.0.2.210, freed with doomed", got)
		}
	})

	t.Run("requests over a LoadBalancer limit are refused before anything is allocated", func(t *testing.T) {
		var ports []func(*v1.Service)
		for i := range 101 {
			ports = append(ports, withPort(v1.ProtocolTCP, int32(1000+i), 0))
		}
		env.create(t, newService("many-ports", append(ports, withAnnotation(annotation.LoadBalancerIPs, "192.0.2.211"))...))
		env.warning(t, "many-ports", "has 101 ports; a groundcloud load balancer carries at most 100")
		env.expectNoAddress(t, "many-ports")

		var ranges []string
		for i := range 101 {
			ranges = append(ranges, fmt.Sprintf("10.1.%d.0/24", i))
		}
		env.create(t, newService("many-ranges", withPort(v1.ProtocolTCP, 80, env.nodePort(t)), withSourceRanges(ranges...), withAnnotation(annotation.LoadBalancerIPs, "192.0.2.211")))
		env.warning(t, "many-ranges", "101 ranges, more than a LoadBalancer holds (100)")
		env.expectNoAddress(t, "many-ranges")

		env.delete(t, "many-ports")
		env.delete(t, "many-ranges")
		env.create(t, newService("after-limits", withPort(v1.ProtocolTCP, 80, env.nodePort(t)), withAnnotation(annotation.LoadBalancerIPs, "192.0.2.211")))
		if got := env.addresses(t, "after-limits", 1)[0]; got != netip.MustParseAddr("192.0.2.211") {
			t.Fatalf("after-limits got %s, want 192.0.2.211, which the refused Services never held", got)
		}
	})

	var ranged []netip.AddrPort // IPv4 and IPv6
	insideRanges := env.inside.Addr4.String() + "/32, " + env.inside.Addr6.String() + "/128"
	t.Run("the standard source-ranges annotation is honoured", func(t *testing.T) {
		env.create(t, newService("annotated", withPort(v1.ProtocolTCP, 80, env.nodePort(t)), withDualStack(),
			withAnnotation(v1.AnnotationLoadBalancerSourceRangesKey, " "+insideRanges+" ")))
		for _, a := range env.addresses(t, "annotated", 2) {
			ranged = append(ranged, netip.AddrPortFrom(a, 80))
		}
		for _, vip := range ranged {
			env.nodesReached(t, vip, all...)
			env.blocked(t, "outsider", vip)
		}
	})

	t.Run("an unusable source range lets no client in, with a warning", func(t *testing.T) {
		// The apiserver checks the annotation only when it changes and the
		// field is empty: set it beside the field, then drop the field.
		updateService(t, env, "annotated", func(s *v1.Service) {
			s.Spec.LoadBalancerSourceRanges = strings.Split(strings.ReplaceAll(insideRanges, " ", ""), ",")
			s.Annotations[v1.AnnotationLoadBalancerSourceRangesKey] = insideRanges + ",bogus"
		})
		updateService(t, env, "annotated", func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = nil })
		env.warning(t, "annotated", `"bogus" is not a CIDR`)
		for _, vip := range ranged {
			env.blocked(t, "client", vip)
		}
		if got := env.addresses(t, "annotated", 2); got[0] != ranged[0].Addr() || got[1] != ranged[1].Addr() {
			t.Errorf("annotated now has %v, want it to keep %v", got, ranged)
		}
		updateService(t, env, "annotated", func(s *v1.Service) {
			s.Annotations[v1.AnnotationLoadBalancerSourceRangesKey] = insideRanges
		})
		for _, vip := range ranged {
			env.nodesReached(t, vip, all...)
		}
	})

	t.Run("an edit that cannot be met keeps the address and applies the rest", func(t *testing.T) {
		env.create(t, newService("edited", withPort(v1.ProtocolTCP, 80, env.nodePort(t))))
		vip := netip.AddrPortFrom(env.addresses(t, "edited", 1)[0], 80)
		env.nodesReached(t, vip, all...)
		if _, _, err := who(ctx, env.outsider, vip); err != nil {
			t.Fatalf("outsider cannot reach %s before the edit: %v", vip, err)
		}
		updateService(t, env, "edited", func(s *v1.Service) {
			s.Annotations = map[string]string{annotation.LoadBalancerIPs: "203.0.113.5"}
			s.Spec.LoadBalancerSourceRanges = []string{env.inside.Addr4.String() + "/32"}
		})
		env.warning(t, "edited", "203.0.113.5")
		env.blocked(t, "outsider", vip)
		env.nodesReached(t, vip, all...)
		if got := env.addresses(t, "edited", 1)[0]; got != vip.Addr() {
			t.Errorf("edited now has %s, want it to keep %s", got, vip.Addr())
		}
	})
}

// refuseCreate makes the apiserver refuse to create the LoadBalancer
// default/name, with a ValidatingAdmissionPolicy, and waits until it does.
func refuseCreate(t *testing.T, env *lbEnv, name string) {
	t.Helper()
	ctx := t.Context()
	adm := env.client.AdmissionregistrationV1()
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "refuse-" + name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create},
					Rule:       admissionv1.Rule{APIGroups: []string{"groundcloud.io"}, APIVersions: []string{"*"}, Resources: []string{"loadbalancers"}},
				},
			}}},
			Validations: []admissionv1.Validation{{
				Expression: fmt.Sprintf("object.metadata.name != %q", name),
				Message:    "creating this LoadBalancer is refused by this test",
			}},
		},
	}
	if _, err := adm.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "refuse-" + name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		},
	}
	if _, err := adm.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The policy takes effect shortly after it is created.
	lbs := env.dyn.Resource(lbapi.Resource).Namespace("default")
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "groundcloud.io/v1alpha1", "kind": "LoadBalancer",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"addresses": []any{"192.0.2.254"}, "externalTrafficPolicy": "Cluster", "sessionAffinity": "None",
			"ports": []any{map[string]any{"protocol": "TCP", "port": int64(1), "nodePort": int64(30001)}},
		},
	}}
	eventually(t, "the admission policy refusing "+name, func() bool {
		_, err := lbs.Create(ctx, probe, metav1.CreateOptions{})
		if err == nil {
			_ = lbs.Delete(ctx, name, metav1.DeleteOptions{})
			return false
		}
		return strings.Contains(err.Error(), "refused by this test")
	})
}

// updateService changes the Service default/name.
func updateService(t *testing.T, env *lbEnv, name string, change func(*v1.Service)) {
	t.Helper()
	svcs := env.client.CoreV1().Services("default")
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		svc, err := svcs.Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if svc.Annotations == nil {
			svc.Annotations = map[string]string{}
		}
		change(svc)
		_, err = svcs.Update(t.Context(), svc, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("update service %s: %v", name, err)
	}
}

// blocked waits until connections from the client named from to addr fail,
// then checks that three more fail too.
func (env *lbEnv) blocked(t *testing.T, from string, addr netip.AddrPort) {
	t.Helper()
	h := env.Clients[from]
	eventually(t, from+" blocked from "+addr.String(), func() bool {
		_, _, err := who(t.Context(), h, addr)
		return err != nil
	})
	for range 3 {
		if node, _, err := who(t.Context(), h, addr); err == nil {
			t.Fatalf("%s reached %s through %s, which should let it in no more", from, node, addr)
		}
	}
}

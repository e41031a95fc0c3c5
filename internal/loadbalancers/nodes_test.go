package loadbalancers

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudapi "k8s.io/cloud-provider/api"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
)

func newNode(name string, mods ...func(*v1.Node)) *v1.Node {
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}},
		Spec:       v1.NodeSpec{ProviderID: "groundcloud://lab/" + name},
	}
	for _, m := range mods {
		m(n)
	}
	return n
}

func withAddr(t v1.NodeAddressType, a string) func(*v1.Node) {
	return func(n *v1.Node) { n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: t, Address: a}) }
}

func TestBackends(t *testing.T) {
	nodes := []*v1.Node{
		newNode("c", withAddr(v1.NodeInternalIP, "192.0.2.13")),
		newNode("a", withAddr(v1.NodeInternalIP, "192.0.2.11"), withAddr(v1.NodeInternalIP, "2001:db8::11"), withAddr(v1.NodeInternalIP, "192.0.2.99"), withAddr(v1.NodeExternalIP, "198.51.100.1")),
		newNode("ext-only", withAddr(v1.NodeExternalIP, "198.51.100.2"), withAddr(v1.NodeHostName, "x")),
		newNode("no-provider-id", withAddr(v1.NodeInternalIP, "192.0.2.14"), func(n *v1.Node) { n.Spec.ProviderID = "" }),
		newNode("uninitialised", withAddr(v1.NodeInternalIP, "192.0.2.15"), func(n *v1.Node) {
			n.Spec.Taints = []v1.Taint{{Key: cloudapi.TaintExternalCloudProvider, Effect: v1.TaintEffectNoSchedule}}
		}),
		newNode("excluded", withAddr(v1.NodeInternalIP, "192.0.2.16"), func(n *v1.Node) { n.Labels[v1.LabelNodeExcludeBalancers] = "" }),
		newNode("excluded-true", withAddr(v1.NodeInternalIP, "192.0.2.18"), func(n *v1.Node) { n.Labels[v1.LabelNodeExcludeBalancers] = "true" }),
		newNode("exclusion-false", withAddr(v1.NodeInternalIP, "192.0.2.19"), func(n *v1.Node) { n.Labels[v1.LabelNodeExcludeBalancers] = "false" }),
		newNode("autoscaler-removes", withAddr(v1.NodeInternalIP, "192.0.2.20"), func(n *v1.Node) {
			n.Spec.Taints = []v1.Taint{{Key: toBeDeletedTaint, Effect: v1.TaintEffectNoSchedule}}
		}),
		newNode("being-deleted", withAddr(v1.NodeInternalIP, "192.0.2.21"), func(n *v1.Node) { n.DeletionTimestamp = &metav1.Time{} }),
		newNode("not-ready", withAddr(v1.NodeInternalIP, "192.0.2.22"), func(n *v1.Node) {
			n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionFalse}}
		}),
		newNode("no-address"),
		newNode("from-inventory"),
	}
	fallback := func(n *v1.Node) []v1.NodeAddress {
		if n.Name == "from-inventory" {
			return []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.17"}}
		}
		return nil
	}
	want := []v1alpha1.Backend{
		{NodeName: "a", Addresses: []string{"192.0.2.11", "2001:db8::11"}},
		{NodeName: "c", Addresses: []string{"192.0.2.13"}},
		{NodeName: "exclusion-false", Addresses: []string{"192.0.2.19"}},
		{NodeName: "ext-only", Addresses: []string{"198.51.100.2"}},
		{NodeName: "from-inventory", Addresses: []string{"192.0.2.17"}},
		{NodeName: "not-ready", Addresses: []string{"192.0.2.22"}},
	}
	if diff := cmp.Diff(want, Backends(nodes, fallback)); diff != "" {
		t.Errorf("Backends (-want +got):\n%s", diff)
	}
}

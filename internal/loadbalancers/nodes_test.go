package loadbalancers

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

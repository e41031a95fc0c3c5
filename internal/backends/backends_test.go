package backends

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudapi "k8s.io/cloud-provider/api"
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

func withTaint(key string) func(*v1.Node) {
	return func(n *v1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: key, Effect: v1.TaintEffectNoSchedule})
	}
}

func withPodRoutes(st v1.ConditionStatus) func(*v1.Node) {
	return func(n *v1.Node) {
		n.Status.Conditions = append(n.Status.Conditions, v1.NodeCondition{Type: ConditionPodRoutes, Status: st, LastHeartbeatTime: metav1.Now()})
	}
}

func withLabel(k, v string) func(*v1.Node) {
	return func(n *v1.Node) { n.Labels[k] = v }
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

func TestOf(t *testing.T) {
	internal := withAddr(v1.NodeInternalIP, "192.0.2.11")
	wait := Rules{WaitForPodRoutes: true}
	for _, tc := range []struct {
		name  string
		rules Rules
		node  *v1.Node
		want  []netip.Addr // nil: not a backend
	}{
		{name: "initialised with an InternalIP", node: newNode("n", internal), want: addrs("192.0.2.11")},
		{name: "one InternalIP per family, ExternalIPs ignored", node: newNode("n",
			withAddr(v1.NodeInternalIP, "192.0.2.11"), withAddr(v1.NodeInternalIP, "2001:db8::11"),
			withAddr(v1.NodeInternalIP, "192.0.2.99"), withAddr(v1.NodeExternalIP, "198.51.100.1")),
			want: addrs("192.0.2.11", "2001:db8::11")},
		{name: "ExternalIP when no InternalIP", node: newNode("n", withAddr(v1.NodeExternalIP, "198.51.100.2"), withAddr(v1.NodeHostName, "x")),
			want: addrs("198.51.100.2")},
		{name: "IPv4-mapped IPv6 is IPv4", node: newNode("n", withAddr(v1.NodeInternalIP, "::ffff:192.0.2.11")), want: addrs("192.0.2.11")},
		{name: "invalid address skipped", node: newNode("n", withAddr(v1.NodeInternalIP, "nope"), internal), want: addrs("192.0.2.11")},
		{name: "no providerID", node: newNode("n", internal, func(n *v1.Node) { n.Spec.ProviderID = "" })},
		{name: "uninitialized taint", node: newNode("n", internal, withTaint(cloudapi.TaintExternalCloudProvider))},
		{name: "autoscaler removes it", node: newNode("n", internal, withTaint(ToBeDeletedTaint))},
		{name: "other taint", node: newNode("n", internal, withTaint("dedicated")), want: addrs("192.0.2.11")},
		{name: "excluded by label without value", node: newNode("n", internal, withLabel(v1.LabelNodeExcludeBalancers, ""))},
		{name: "excluded by label true", node: newNode("n", internal, withLabel(v1.LabelNodeExcludeBalancers, "true"))},
		{name: "exclusion label false", node: newNode("n", internal, withLabel(v1.LabelNodeExcludeBalancers, "false")), want: addrs("192.0.2.11")},
		{name: "being deleted", node: newNode("n", internal, func(n *v1.Node) { n.DeletionTimestamp = &metav1.Time{} })},
		{name: "NotReady is still a backend", node: newNode("n", internal, func(n *v1.Node) {
			n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionFalse}}
		}), want: addrs("192.0.2.11")},
		{name: "pod routes not waited for", node: newNode("n", internal, withPodRoutes(v1.ConditionFalse)), want: addrs("192.0.2.11")},
		{name: "waiting: routes reported", rules: wait, node: newNode("n", internal, withPodRoutes(v1.ConditionTrue)), want: addrs("192.0.2.11")},
		{name: "waiting: router has not reported yet", rules: wait, node: newNode("n", internal)},
		{name: "waiting: some routes not programmed", rules: wait, node: newNode("n", internal, withPodRoutes(v1.ConditionFalse))},
		{name: "waiting: unknown", rules: wait, node: newNode("n", internal, withPodRoutes(v1.ConditionUnknown))},
		{name: "no address yet", node: newNode("n")},
		{name: "only a hostname", node: newNode("n", withAddr(v1.NodeHostName, "n"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, ok := tc.rules.Of(tc.node)
			if ok != (tc.want != nil) {
				t.Fatalf("Of: backend %v, want %v", ok, tc.want != nil)
			}
			if !ok {
				return
			}
			if diff := cmp.Diff(Backend{Name: "n", Addrs: tc.want}, b, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("Of (-want +got):\n%s", diff)
			}
		})
	}
}

func TestListSortsAndCaps(t *testing.T) {
	var nodes []*v1.Node
	for i := Max + 2; i > 0; i-- {
		nodes = append(nodes, newNode(fmt.Sprintf("n%05d", i), withAddr(v1.NodeInternalIP, "192.0.2.1")))
	}
	nodes = append(nodes, newNode("uninitialised", withTaint(cloudapi.TaintExternalCloudProvider)))
	got, left := Rules{}.List(nodes)
	if len(got) != Max || left != 2 {
		t.Fatalf("List: %d backends, %d left out; want %d, 2", len(got), left, Max)
	}
	if got[0].Name != "n00001" || got[Max-1].Name != fmt.Sprintf("n%05d", Max) {
		t.Errorf("List: first %s, last %s; want the first by name", got[0].Name, got[Max-1].Name)
	}
}

func TestSame(t *testing.T) {
	base := newNode("n", withAddr(v1.NodeInternalIP, "192.0.2.11"))
	for _, tc := range []struct {
		name  string
		rules Rules
		mod   func(*v1.Node)
		same  bool
	}{
		{name: "a heartbeat", mod: func(n *v1.Node) {
			n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
		}, same: true},
		{name: "an unrelated label", mod: withLabel("team", "a"), same: true},
		{name: "new address", mod: func(n *v1.Node) { n.Status.Addresses[0].Address = "192.0.2.12" }},
		{name: "second family", mod: withAddr(v1.NodeInternalIP, "2001:db8::11")},
		{name: "excluded", mod: withLabel(v1.LabelNodeExcludeBalancers, "")},
		{name: "autoscaler taint", mod: withTaint(ToBeDeletedTaint)},
		{name: "pod routes reported, not waited for", mod: withPodRoutes(v1.ConditionTrue), same: true},
		{name: "pod routes reported", rules: Rules{WaitForPodRoutes: true}, mod: withPodRoutes(v1.ConditionTrue)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := base.DeepCopy()
			tc.mod(n)
			if got := tc.rules.Same(base, n); got != tc.same {
				t.Errorf("Same = %v, want %v", got, tc.same)
			}
		})
	}
}

func TestTransformKeepsWhatOfReads(t *testing.T) {
	full := newNode("n", withAddr(v1.NodeInternalIP, "192.0.2.11"), withAddr(v1.NodeInternalIP, "2001:db8::11"),
		withLabel("zone", "a"), withTaint("dedicated"), func(n *v1.Node) {
			n.UID, n.ResourceVersion = "uid-1", "42"
			n.Annotations = map[string]string{"big": "annotation"}
			n.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
			n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue},
				{Type: ConditionPodRoutes, Status: v1.ConditionTrue, Reason: "Programmed", LastHeartbeatTime: metav1.Now()}}
			n.Status.Images = []v1.ContainerImage{{Names: []string{"pause"}, SizeBytes: 1}}
			n.Status.NodeInfo.KubeletVersion = "v1.37.2"
		})
	got, err := Transform(full.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	want := newNode("n", withAddr(v1.NodeInternalIP, "192.0.2.11"), withAddr(v1.NodeInternalIP, "2001:db8::11"),
		withLabel("zone", "a"), withTaint("dedicated"), func(n *v1.Node) {
			n.UID, n.ResourceVersion = "uid-1", "42"
			n.Status.Conditions = []v1.NodeCondition{{Type: ConditionPodRoutes, Status: v1.ConditionTrue, Reason: "Programmed"}}
		})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Transform (-want +got):\n%s", diff)
	}
	wait := Rules{WaitForPodRoutes: true}
	b1, ok1 := wait.Of(full)
	b2, ok2 := wait.Of(got.(*v1.Node))
	if !ok1 || !ok2 || !b1.Equal(b2) {
		t.Errorf("Of after Transform = %v %v, before %v %v", b2, ok2, b1, ok1)
	}
	if other, _ := Transform("not a node"); other != "not a node" {
		t.Errorf("Transform changed a non-Node: %v", other)
	}
}

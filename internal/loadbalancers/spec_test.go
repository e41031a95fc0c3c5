package loadbalancers

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudapi "k8s.io/cloud-provider/api"
	"k8s.io/utils/ptr"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/ipam"
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
		{NodeName: "ext-only", Addresses: []string{"198.51.100.2"}},
		{NodeName: "from-inventory", Addresses: []string{"192.0.2.17"}},
	}
	if diff := cmp.Diff(want, Backends(nodes, fallback)); diff != "" {
		t.Errorf("Backends (-want +got):\n%s", diff)
	}
}

func TestDesiredSpec(t *testing.T) {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: v1.ServiceSpec{
			Type: v1.ServiceTypeLoadBalancer,
			Ports: []v1.ServicePort{
				{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080},
				{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53, NodePort: 30053},
			},
			ExternalTrafficPolicy:    v1.ServiceExternalTrafficPolicyLocal,
			HealthCheckNodePort:      32001,
			SessionAffinity:          v1.ServiceAffinityClientIP,
			SessionAffinityConfig:    &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](600)}},
			LoadBalancerSourceRanges: []string{"198.51.100.7/24", " 192.0.2.0/24", "198.51.100.0/24", "bogus"},
		},
	}
	alloc := ipam.Allocation{Pool: "default", Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.200"), netip.MustParseAddr("2001:db8::c8")}}
	got := DesiredSpec(svc, []*v1.Node{newNode("a", withAddr(v1.NodeInternalIP, "192.0.2.11"))}, nil, alloc, "team")
	want := v1alpha1.LoadBalancerSpec{
		Addresses:  []string{"192.0.2.200", "2001:db8::c8"},
		Pool:       "default",
		SharingKey: "team",
		Ports: []v1alpha1.Port{
			{Name: "http", Protocol: "TCP", Port: 80, NodePort: 30080},
			{Name: "dns", Protocol: "UDP", Port: 53, NodePort: 30053},
		},
		Backends:                      []v1alpha1.Backend{{NodeName: "a", Addresses: []string{"192.0.2.11"}}},
		HealthCheck:                   &v1alpha1.HealthCheck{Port: 32001, Path: "/healthz"},
		ExternalTrafficPolicy:         "Local",
		SessionAffinity:               "ClientIP",
		SessionAffinityTimeoutSeconds: ptr.To[int32](600),
		SourceRanges:                  []string{"192.0.2.0/24", "198.51.100.0/24"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DesiredSpec (-want +got):\n%s", diff)
	}

	svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyCluster
	if hc := DesiredSpec(svc, nil, nil, alloc, "").HealthCheck; hc.Port != KubeProxyHealthPort || hc.Path != "/healthz" {
		t.Errorf("Cluster policy health check = %+v, want kube-proxy's :%d/healthz", hc, KubeProxyHealthPort)
	}

	st := ServiceStatus(&want)
	if len(st.Ingress) != 2 || st.Ingress[0].IP != "192.0.2.200" || *st.Ingress[0].IPMode != v1.LoadBalancerIPModeProxy {
		t.Errorf("ServiceStatus = %+v", st)
	}
}

func TestCheckPorts(t *testing.T) {
	for _, tt := range []struct {
		name    string
		ports   []v1.ServicePort
		wantErr string
	}{
		{name: "tcp and udp", ports: []v1.ServicePort{{Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080}, {Protocol: v1.ProtocolUDP, Port: 53, NodePort: 30053}}},
		{name: "sctp", ports: []v1.ServicePort{{Protocol: v1.ProtocolSCTP, Port: 80, NodePort: 30080}}, wantErr: "use TCP or UDP"},
		{name: "no node port", ports: []v1.ServicePort{{Protocol: v1.ProtocolTCP, Port: 80}}, wantErr: "allocateLoadBalancerNodePorts"},
		{name: "no ports", wantErr: "add at least one"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}, Spec: v1.ServiceSpec{Ports: tt.ports}}
			err := checkPorts(svc)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("checkPorts = %v, want an error mentioning %q", err, tt.wantErr)
			}
		})
	}
}

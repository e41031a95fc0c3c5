package loadbalancers

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/config"
	"github.com/groundcloud/groundcloud/internal/ipam"
)

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
			LoadBalancerSourceRanges: []string{"198.51.100.7/24", " 192.0.2.0/24", "198.51.100.0/24"},
		},
	}
	held := Allocated{
		Allocation: ipam.Allocation{Pool: "default", Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.200"), netip.MustParseAddr("2001:db8::c8")}},
		SharingKey: "team",
		Ports:      []ipam.Port{{Protocol: v1.ProtocolTCP, Port: 80}, {Protocol: v1.ProtocolUDP, Port: 53}},
		Forwarding: config.ForwardingProxy,
		Announce:   &v1alpha1.Announce{Mode: v1alpha1.AnnounceBGP, HostSelector: "edge=true"},
	}
	got, err := DesiredSpec(svc, held, DefaultClusterHealthCheck)
	if err != nil {
		t.Fatal(err)
	}
	want := v1alpha1.LoadBalancerSpec{
		Addresses:  []string{"192.0.2.200", "2001:db8::c8"},
		Pool:       "default",
		SharingKey: "team",
		Ports: []v1alpha1.Port{
			{Name: "http", Protocol: "TCP", Port: 80, NodePort: 30080},
			{Name: "dns", Protocol: "UDP", Port: 53, NodePort: 30053},
		},
		HealthCheck:                   &v1alpha1.HealthCheck{Type: "HTTP", Port: 32001, Path: "/healthz"},
		ExternalTrafficPolicy:         "Local",
		SessionAffinity:               "ClientIP",
		SessionAffinityTimeoutSeconds: ptr.To[int32](600),
		SourceRanges:                  []string{"192.0.2.0/24", "198.51.100.0/24"},
		Forwarding:                    v1alpha1.ForwardingProxy,
		Announce:                      &v1alpha1.Announce{Mode: v1alpha1.AnnounceBGP, HostSelector: "edge=true"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DesiredSpec (-want +got):\n%s", diff)
	}

	svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyCluster
	if spec, _ := DesiredSpec(svc, held, DefaultClusterHealthCheck); spec.HealthCheck.Port != KubeProxyHealthPort || spec.HealthCheck.Path != "/healthz" {
		t.Errorf("Cluster policy health check = %+v, want kube-proxy's :%d/healthz", spec.HealthCheck, KubeProxyHealthPort)
	}

	// The cloud-config's cluster health check: another HTTP endpoint, or a
	// TCP connection to the first TCP port's NodePort (HTTP for UDP only).
	for _, tc := range []struct {
		name  string
		check config.ClusterHealthCheck
		ports []v1.ServicePort
		want  v1alpha1.HealthCheck
	}{
		{"http", config.ClusterHealthCheck{Kind: config.HealthCheckHTTP, Port: 9879, Path: "/ready"}, nil, v1alpha1.HealthCheck{Type: "HTTP", Port: 9879, Path: "/ready"}},
		{"tcp-node-port", config.ClusterHealthCheck{Kind: config.HealthCheckTCPNodePort, Port: 10256, Path: "/healthz"}, nil, v1alpha1.HealthCheck{Type: "TCP", Port: 30080}},
		{"tcp-node-port, UDP first", config.ClusterHealthCheck{Kind: config.HealthCheckTCPNodePort, Port: 10256, Path: "/healthz"},
			[]v1.ServicePort{svc.Spec.Ports[1], svc.Spec.Ports[0]}, v1alpha1.HealthCheck{Type: "TCP", Port: 30080}},
		{"tcp-node-port, UDP only", config.ClusterHealthCheck{Kind: config.HealthCheckTCPNodePort, Port: 10256, Path: "/healthz"},
			[]v1.ServicePort{svc.Spec.Ports[1]}, v1alpha1.HealthCheck{Type: "HTTP", Port: 10256, Path: "/healthz"}},
	} {
		c := svc.DeepCopy()
		if tc.ports != nil {
			c.Spec.Ports = tc.ports
		}
		spec, _ := DesiredSpec(c, held, tc.check)
		if diff := cmp.Diff(&tc.want, spec.HealthCheck); diff != "" {
			t.Errorf("%s: health check (-want +got):\n%s", tc.name, diff)
		}
	}

	// Ports the allocation does not hold (added while a changed request
	// could not be met) wait for it; held ones take the Service's node port.
	svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Name: "new", Protocol: v1.ProtocolTCP, Port: 443, NodePort: 30443})
	svc.Spec.Ports[0].NodePort = 31080
	spec, _ := DesiredSpec(svc, held, DefaultClusterHealthCheck)
	wantPorts := []v1alpha1.Port{{Name: "http", Protocol: "TCP", Port: 80, NodePort: 31080}, {Name: "dns", Protocol: "UDP", Port: 53, NodePort: 30053}}
	if diff := cmp.Diff(wantPorts, spec.Ports); diff != "" {
		t.Errorf("ports of a partly held Service (-want +got):\n%s", diff)
	}

	// Source ranges that cannot all be used accept no client.
	svc.Spec.LoadBalancerSourceRanges = []string{"192.0.2.0/24", "bogus"}
	spec, err = DesiredSpec(svc, held, DefaultClusterHealthCheck)
	if !errors.Is(err, ErrSourceRanges) || !strings.Contains(err.Error(), `"bogus"`) {
		t.Errorf("DesiredSpec with a bad source range: %v, want ErrSourceRanges naming it", err)
	}
	if diff := cmp.Diff(DenyAllSourceRanges, spec.SourceRanges); diff != "" {
		t.Errorf("source ranges with a bad entry (-want +got):\n%s", diff)
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
		{name: "no node port: a matter of the forwarding (TestNoNodePorts)", ports: []v1.ServicePort{{Protocol: v1.ProtocolTCP, Port: 80}}},
		{name: "no ports", wantErr: "add at least one"},
		{name: "over the limit", ports: manyPorts(MaxPorts + 1), wantErr: "at most 100"},
		{name: "at the limit", ports: manyPorts(MaxPorts)},
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

func manyPorts(n int) []v1.ServicePort {
	var out []v1.ServicePort
	for i := range n {
		out = append(out, v1.ServicePort{Protocol: v1.ProtocolTCP, Port: int32(1000 + i), NodePort: int32(30000 + i)})
	}
	return out
}

// TestNoNodePorts: a Service without node ports
// (allocateLoadBalancerNodePorts false) is served by passthrough
// forwarding, which hands packets to a node's kube-proxy unchanged; proxy
// forwarding, which sends traffic to node ports, leaves those ports out and
// says why. Found by upstream's "should be able to create LoadBalancer
// Service without NodePort and change it".
func TestNoNodePorts(t *testing.T) {
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}, Spec: v1.ServiceSpec{
		AllocateLoadBalancerNodePorts: ptr.To(false),
		Ports: []v1.ServicePort{
			{Name: "http", Protocol: v1.ProtocolTCP, Port: 80},
			{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53},
		},
	}}
	ports := []ipam.Port{{Protocol: v1.ProtocolTCP, Port: 80}, {Protocol: v1.ProtocolUDP, Port: 53}}
	tcpCheck := config.ClusterHealthCheck{Kind: config.HealthCheckTCPNodePort, Port: 10256, Path: "/healthz"}
	for _, tt := range []struct {
		forwarding config.Forwarding
		wantPorts  []v1alpha1.Port
		wantErr    string
	}{
		{forwarding: config.ForwardingPassthrough, wantPorts: []v1alpha1.Port{{Name: "http", Protocol: "TCP", Port: 80}, {Name: "dns", Protocol: "UDP", Port: 53}}},
		{forwarding: config.ForwardingProxy, wantErr: "port 80 has no nodePort, and proxy forwarding sends traffic to node ports"},
	} {
		t.Run(string(tt.forwarding), func(t *testing.T) {
			a := Allocated{Allocation: ipam.Allocation{Pool: "default", Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.200")}}, Ports: ports, Forwarding: tt.forwarding}
			spec, err := DesiredSpec(svc, a, tcpCheck)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(spec.Ports, tt.wantPorts) {
				t.Errorf("ports = %+v, want %+v", spec.Ports, tt.wantPorts)
			}
			// No TCP port has a node port: the HTTP check of kube-proxy.
			if spec.HealthCheck.Type != v1alpha1.HealthCheckHTTP || spec.HealthCheck.Port != 10256 {
				t.Errorf("health check = %+v, want kube-proxy's HTTP check", spec.HealthCheck)
			}
			err = nodePortProblem(svc, spec.Forwarding)
			if tt.wantErr == "" {
				if err != nil {
					t.Errorf("nodePortProblem = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "port 53") {
				t.Errorf("nodePortProblem = %v, want %q for both ports", err, tt.wantErr)
			}
		})
	}
}

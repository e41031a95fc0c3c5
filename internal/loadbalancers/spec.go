package loadbalancers

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/config"
	"github.com/groundcloud/groundcloud/internal/ipam"
)

// KubeProxyHealthPort is where agents probe nodes of Services with
// externalTrafficPolicy Cluster by default: kube-proxy's /healthz.
const KubeProxyHealthPort = 10256

// DefaultClusterHealthCheck is the cloud-config's default: kube-proxy's.
var DefaultClusterHealthCheck = config.ClusterHealthCheck{Kind: config.HealthCheckHTTP, Port: KubeProxyHealthPort, Path: "/healthz"}

// Allocated is what a load balancer's addresses are held with: the
// allocation, its sharing key, the ports the allocator recorded for it,
// and how its addresses are served (serving.go).
type Allocated struct {
	ipam.Allocation
	SharingKey string
	Ports      []ipam.Port
	Forwarding config.Forwarding // as the allocator decided ("": passthrough)
	Announce   *v1alpha1.Announce
}

// DesiredSpec is the LoadBalancer spec for svc with what it holds; check is
// how nodes are probed for
// externalTrafficPolicy Cluster (the cloud-config's). Its ports are those of svc that a
// holds (with svc's names and node ports), in svc's order; it has none when
// a holds none of them. When svc's source ranges cannot all be used the
// spec accepts no client and the error says why (see SourceRanges).
func DesiredSpec(svc *v1.Service, a Allocated, check config.ClusterHealthCheck) (v1alpha1.LoadBalancerSpec, error) {
	spec := v1alpha1.LoadBalancerSpec{
		Pool:                  a.Pool,
		SharingKey:            a.SharingKey,
		ExternalTrafficPolicy: string(v1.ServiceExternalTrafficPolicyCluster),
		SessionAffinity:       string(v1.ServiceAffinityNone),
		Forwarding:            apiForwarding(a.Forwarding),
		Announce:              a.Announce.DeepCopy(),
	}
	for _, addr := range a.Addresses {
		spec.Addresses = append(spec.Addresses, addr.String())
	}
	for _, p := range svc.Spec.Ports {
		held := slices.Contains(a.Ports, ipam.Port{Protocol: p.Protocol, Port: p.Port})
		// A port with no node port: passthrough forwarding needs none
		// (nodePortProblem says why proxy forwarding leaves it out).
		served := p.NodePort != 0 || spec.Forwarding == v1alpha1.ForwardingPassthrough
		if held && served && (p.Protocol == v1.ProtocolTCP || p.Protocol == v1.ProtocolUDP) {
			spec.Ports = append(spec.Ports, v1alpha1.Port{Name: p.Name, Protocol: string(p.Protocol), Port: p.Port, NodePort: p.NodePort})
		}
	}
	spec.HealthCheck = clusterHealthCheck(spec.Ports, check)
	if svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal {
		spec.ExternalTrafficPolicy = string(v1.ServiceExternalTrafficPolicyLocal)
		spec.HealthCheck = &v1alpha1.HealthCheck{Type: v1alpha1.HealthCheckHTTP, Port: svc.Spec.HealthCheckNodePort, Path: "/healthz"}
	}
	if svc.Spec.SessionAffinity == v1.ServiceAffinityClientIP {
		spec.SessionAffinity = string(v1.ServiceAffinityClientIP)
		if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			t := *c.ClientIP.TimeoutSeconds
			spec.SessionAffinityTimeoutSeconds = &t
		}
	}
	var err error
	spec.SourceRanges, err = SourceRanges(svc)
	return spec, err
}

// clusterHealthCheck is the health check of externalTrafficPolicy Cluster:
// a TCP connection to the first TCP port's NodePort with tcp-node-port (a
// Service with no TCP port that has one keeps the HTTP check), else the
// HTTP check.
func clusterHealthCheck(ports []v1alpha1.Port, check config.ClusterHealthCheck) *v1alpha1.HealthCheck {
	if check.Kind == config.HealthCheckTCPNodePort {
		for _, p := range ports {
			if p.Protocol == string(v1.ProtocolTCP) && p.NodePort != 0 {
				return &v1alpha1.HealthCheck{Type: v1alpha1.HealthCheckTCP, Port: p.NodePort}
			}
		}
	}
	if check.Port == 0 {
		check = DefaultClusterHealthCheck
	}
	return &v1alpha1.HealthCheck{Type: v1alpha1.HealthCheckHTTP, Port: check.Port, Path: check.Path}
}

// PrintAnnotations are the annotations kubectl prints a LoadBalancer
// with, for spec: its ports and its addresses as text.
func PrintAnnotations(spec *v1alpha1.LoadBalancerSpec) map[string]string {
	return map[string]string{
		v1alpha1.AnnotationPorts:     PortsSummary(spec),
		v1alpha1.AnnotationAddresses: strings.Join(spec.Addresses, ","),
	}
}

// PortsSummary is the value of v1alpha1.AnnotationPorts for spec.
func PortsSummary(spec *v1alpha1.LoadBalancerSpec) string {
	var parts []string
	for _, p := range spec.Ports {
		parts = append(parts, fmt.Sprintf("%d/%s", p.Port, p.Protocol))
	}
	return strings.Join(parts, ",")
}

// ServiceStatus is what the Service's status.loadBalancer shows: each
// address with ipMode VIP for passthrough forwarding (nodes receive packets
// addressed to the VIP, so kube-proxy must serve it) and Proxy otherwise
// (agents DNAT: the node does not see the VIP as destination).
func ServiceStatus(spec *v1alpha1.LoadBalancerSpec) *v1.LoadBalancerStatus {
	st := &v1.LoadBalancerStatus{}
	for _, a := range spec.Addresses {
		mode := ipMode(spec.Forwarding)
		st.Ingress = append(st.Ingress, v1.LoadBalancerIngress{IP: a, IPMode: &mode})
	}
	return st
}

// allocationOf reads the allocation record in a LoadBalancer.
func allocationOf(lb *v1alpha1.LoadBalancer) (ipam.Allocation, []ipam.Port, error) {
	alloc := ipam.Allocation{Pool: lb.Spec.Pool}
	for _, s := range lb.Spec.Addresses {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return ipam.Allocation{}, nil, err
		}
		alloc.Addresses = append(alloc.Addresses, a)
	}
	var ports []ipam.Port
	for _, p := range lb.Spec.Ports {
		ports = append(ports, ipam.Port{Protocol: v1.Protocol(p.Protocol), Port: p.Port})
	}
	return alloc, ports, nil
}

// ownerReference makes the Service own its LoadBalancer, so that garbage
// collection removes the object if the Service goes without us.
func ownerReference(svc *v1.Service) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID}
}

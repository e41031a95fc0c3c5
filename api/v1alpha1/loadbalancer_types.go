package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LoadBalancer is the load balancer of one Service of type LoadBalancer:
// same namespace and name as the Service, owned by it. The controller
// manager writes the spec; agents on load-balancer hosts program it and
// report in the status.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=glb;glbs,categories=groundcloud
// +kubebuilder:printcolumn:name="Addresses",type=string,JSONPath=`.metadata.annotations.groundcloud\.io/addresses`,description="Virtual IPs"
// +kubebuilder:printcolumn:name="Ports",type=string,JSONPath=`.metadata.annotations.groundcloud\.io/ports`,description="Ports served"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Pool",type=string,JSONPath=`.spec.pool`,priority=1
// +kubebuilder:printcolumn:name="Forwarding",type=string,JSONPath=`.spec.forwarding`,priority=1
// +kubebuilder:printcolumn:name="Announce",type=string,JSONPath=`.spec.announce.mode`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type LoadBalancer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   LoadBalancerSpec   `json:"spec"`
	Status LoadBalancerStatus `json:"status,omitempty"`
}

// LoadBalancerSpec is what the data plane must do for one Service. It names
// no node: every agent applies the same rule to the Nodes it watches
// (internal/backends), so that a node change writes no LoadBalancer.
// Objects written by earlier versions listed the nodes in spec.backends; the field
// is gone from the schema, so the apiserver drops it when it reads them
// (see docs/install.md, "Upgrading").
//
// +kubebuilder:validation:XValidation:rule="self.externalTrafficPolicy != 'Local' || has(self.healthCheck)",message="externalTrafficPolicy Local needs a healthCheck"
// +kubebuilder:validation:XValidation:rule="self.sessionAffinity == 'ClientIP' || !has(self.sessionAffinityTimeoutSeconds)",message="sessionAffinityTimeoutSeconds needs sessionAffinity ClientIP"
type LoadBalancerSpec struct {
	// Addresses are the virtual IPs, at most one per family.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=2
	// +kubebuilder:validation:items:MaxLength=45
	// +kubebuilder:validation:items:XValidation:rule="isIP(self)",message="must be an IPv4 or IPv6 address"
	// +kubebuilder:validation:XValidation:rule="self.size() < 2 || ip(self[0]).family() != ip(self[1]).family()",message="at most one address per family"
	// +listType=set
	Addresses []string `json:"addresses"`

	// Pool is the cloud-config [Pool] the addresses come from.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Pool string `json:"pool,omitempty"`

	// SharingKey is the Service's groundcloud.io/allow-shared-ip annotation:
	// load balancers with the same key may share an address on distinct ports.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	SharingKey string `json:"sharingKey,omitempty"`

	// Ports are the Service's ports.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	// +listType=map
	// +listMapKey=port
	// +listMapKey=protocol
	Ports []Port `json:"ports"`

	// HealthCheck is how agents probe each backend.
	// +optional
	HealthCheck *HealthCheck `json:"healthCheck,omitempty"`

	// ExternalTrafficPolicy is the Service's: Cluster or Local.
	// +kubebuilder:validation:Enum=Cluster;Local
	// +kubebuilder:default=Cluster
	ExternalTrafficPolicy string `json:"externalTrafficPolicy"`

	// SessionAffinity is the Service's: None or ClientIP.
	// +kubebuilder:validation:Enum=None;ClientIP
	// +kubebuilder:default=None
	SessionAffinity string `json:"sessionAffinity"`

	// SessionAffinityTimeoutSeconds is the ClientIP affinity timeout.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	// +optional
	SessionAffinityTimeoutSeconds *int32 `json:"sessionAffinityTimeoutSeconds,omitempty"`

	// SourceRanges, when set, are the only client networks allowed. The
	// controller manager writes ["0.0.0.0/32", "::1/128"], which no
	// client on the network can match (Linux forwards no packet from
	// either), when a Service's source ranges cannot all be used.
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MaxLength=49
	// +kubebuilder:validation:items:XValidation:rule="isCIDR(self)",message="must be a CIDR"
	// +listType=set
	// +optional
	SourceRanges []string `json:"sourceRanges,omitempty"`

	// Forwarding is how load-balancer hosts hand traffic to nodes:
	// Passthrough (the packet unchanged to a node on a shared link, which
	// replies straight to the client; Service ipMode VIP) or Proxy (DNAT to
	// a NodePort and SNAT to the address; ipMode Proxy). Absent means Proxy,
	// what objects written before the field existed were.
	// +kubebuilder:validation:Enum=Passthrough;Proxy
	// +optional
	Forwarding string `json:"forwarding,omitempty"`

	// Announce is how the addresses are made known to the network and by
	// which load-balancer hosts: the pool's announce, hosts and BGP keys.
	// Absent means L2 by every host, what objects written before the field
	// existed were.
	// +optional
	Announce *Announce `json:"announce,omitempty"`
}

// Announce is how and by which hosts a LoadBalancer's addresses are announced.
type Announce struct {
	// Mode is L2 (one host answers ARP/NDP for each address) or BGP (hosts
	// advertise host routes to the cloud-config's BGP peers).
	// +kubebuilder:validation:Enum=L2;BGP
	Mode string `json:"mode"`
	// HostSelector is a label selector in kubectl's syntax: the hosts whose
	// labels match announce and serve the addresses. Empty selects every host.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	HostSelector string `json:"hostSelector,omitempty"`
	// Communities are BGP standard communities ("ASN:value") of the routes.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:Pattern=`^[0-9]{1,5}:[0-9]{1,5}$`
	// +listType=set
	// +optional
	Communities []string `json:"communities,omitempty"`
	// LocalPreference is the BGP LOCAL_PREF of the routes (iBGP).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4294967295
	// +optional
	LocalPreference *int64 `json:"localPreference,omitempty"`
}

// The values of Announce.Mode.
const (
	AnnounceL2  = "L2"
	AnnounceBGP = "BGP"
)

// The values of LoadBalancerSpec.Forwarding.
const (
	ForwardingPassthrough = "Passthrough"
	ForwardingProxy       = "Proxy"
)

// Port is one port of the Service.
type Port struct {
	// Name is the Service port's name.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Name string `json:"name,omitempty"`
	// Protocol is TCP or UDP.
	// +kubebuilder:validation:Enum=TCP;UDP
	Protocol string `json:"protocol"`
	// Port is the port on the virtual IPs.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
	// NodePort is the port on the nodes that proxy forwarding sends
	// traffic to; 0 when the Service has none
	// (spec.allocateLoadBalancerNodePorts false), which only passthrough
	// forwarding serves.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65535
	NodePort int32 `json:"nodePort"`
}

// HealthCheck says how to probe a backend.
//
// +kubebuilder:validation:XValidation:rule="self.type == 'TCP' || has(self.path)",message="an HTTP health check needs a path"
type HealthCheck struct {
	// Type is HTTP (a GET of port and path; a 200 answer means healthy)
	// or TCP (a connection to port; accepted means healthy).
	// +kubebuilder:validation:Enum=HTTP;TCP
	// +kubebuilder:default=HTTP
	// +optional
	Type string `json:"type,omitempty"`
	// Port on the node: the Service's healthCheckNodePort for
	// externalTrafficPolicy Local; for Cluster, the cloud-config's
	// cluster-health-check-port (kube-proxy's 10256 by default), or the
	// Service's NodePort for a TCP check.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
	// Path of the HTTP GET.
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^/`
	// +optional
	Path string `json:"path,omitempty"`
}

// Health check types.
const (
	HealthCheckHTTP = "HTTP"
	HealthCheckTCP  = "TCP"
)

// LoadBalancerStatus is what agents report.
type LoadBalancerStatus struct {
	// ObservedGeneration is the spec generation the Ready condition is about.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready (every address is held by a host that programmed
	// this generation), written by the agents; AddressOrphaned (an address
	// is kept outside the pools the namespace may use), written by the
	// controller manager only while it is true.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Addresses says which host holds each virtual IP.
	// +listType=map
	// +listMapKey=address
	// +optional
	Addresses []AddressStatus `json:"addresses,omitempty"`

	// Hosts is each load-balancer host's view: its Programmed condition.
	// +listType=map
	// +listMapKey=name
	// +optional
	Hosts []HostStatus `json:"hosts,omitempty"`
}

// AddressStatus is one virtual IP and the host holding it.
type AddressStatus struct {
	Address string `json:"address"`
	// Host is the load-balancer host that answers for the address.
	// +optional
	Host string `json:"host,omitempty"`
}

// HostStatus is one load-balancer host's report.
type HostStatus struct {
	// Name of the host (its agent's --host-name).
	Name string `json:"name"`
	// Conditions: Programmed (its data plane carries this generation);
	// with memberlist also Member, Gossip and AddressConflict.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Announcing are the addresses this host advertises over BGP now.
	// +kubebuilder:validation:MaxItems=2
	// +listType=set
	// +optional
	Announcing []string `json:"announcing,omitempty"`
	// InUse are the addresses of this LoadBalancer that this host owns and
	// a station which is no load-balancer host claims on the link (address
	// conflict detection; the AddressConflict condition says the same in
	// words). The controller manager hands none of them to another Service.
	// +kubebuilder:validation:MaxItems=2
	// +listType=map
	// +listMapKey=address
	// +optional
	InUse []AddressInUse `json:"inUse,omitempty"`
}

// AddressInUse is an address a station which is no load-balancer host
// claims on the link.
type AddressInUse struct {
	Address string `json:"address"`
	// MAC is the other station's link-layer address.
	MAC string `json:"mac"`
	// Since is when the host first saw the claim.
	Since metav1.Time `json:"since"`
	// Announced: the host holds the address anyway (it held it before the
	// claim) and defends it; false: it does not announce it.
	// +optional
	Announced bool `json:"announced,omitempty"`
}

// LoadBalancerList is a list of LoadBalancers.
//
// +kubebuilder:object:root=true
type LoadBalancerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LoadBalancer `json:"items"`
}

// Annotations on a LoadBalancer. They are part of the CRD: its printer
// columns read them. The annotations users put on Services are not API
// types and are named in internal/annotation.

// AnnotationPorts on a LoadBalancer lists its ports for printing
// ("80/TCP,53/UDP"); the controller manager writes it with the spec.
const AnnotationPorts = "groundcloud.io/ports"

// AnnotationAddresses on a LoadBalancer lists its addresses for printing
// ("192.0.2.200,2001:db8::c8"): a printer column shows only the first value
// a JSONPath finds, or a list as JSON. The controller manager writes it
// with the spec.
const AnnotationAddresses = "groundcloud.io/addresses"

// Condition types and reasons.
const (
	ConditionReady      = "Ready"
	ConditionProgrammed = "Programmed"
	// ConditionAddressOrphaned is true while an address of the LoadBalancer
	// is kept although no pool its namespace may use contains it any more.
	// The controller manager writes it (and only it) in the status; its
	// reason is the ipam.OrphanCause.
	ConditionAddressOrphaned = "AddressOrphaned"
	// ConditionAddressConflict, in status.hosts, is true while a station on
	// the link that is no load-balancer host claims an address of the
	// LoadBalancer that the host owns: the address is not announced when
	// the claim came before a host first held it (reason InUse; Ready is
	// then false, reason AddressConflict), and defended when after (reason
	// Defended). The host writes it false (reason NoConflict) once the
	// claim stops.
	ConditionAddressConflict = "AddressConflict"
)

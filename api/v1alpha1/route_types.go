package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Route sends one pod CIDR of one node to that node: the route table entry
// a cloud's VPC would hold. The controller manager's route controller
// writes the spec (through the provider's Routes interface); routers
// (groundcloud-router on nodes and gateway hosts) program it into their
// kernels and report in the status. It is cluster-scoped, one object per
// node and pod CIDR, so a dual-stack node has two.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=groute;groutes,categories=groundcloud
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.nodeName`
// +kubebuilder:printcolumn:name="Destination",type=string,JSONPath=`.spec.destinationCIDR`
// +kubebuilder:printcolumn:name="Next-Hop",type=string,JSONPath=`.spec.nextHop`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Route struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   RouteSpec   `json:"spec"`
	Status RouteStatus `json:"status,omitempty"`
}

// RouteSpec is one route: packets to DestinationCIDR go to NextHop.
//
// +kubebuilder:validation:XValidation:rule="cidr(self.destinationCIDR).ip().family() == ip(self.nextHop).family()",message="nextHop must be of the destinationCIDR's family"
type RouteSpec struct {
	// NodeName is the Node whose pod CIDR this is.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="nodeName is immutable"
	NodeName string `json:"nodeName"`

	// DestinationCIDR is the node's pod CIDR, in canonical form.
	// +kubebuilder:validation:MaxLength=49
	// +kubebuilder:validation:XValidation:rule="isCIDR(self) && string(cidr(self).masked()) == self",message="must be a CIDR in canonical form, without host bits"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="destinationCIDR is immutable"
	DestinationCIDR string `json:"destinationCIDR"`

	// NextHop is the node's address that packets to DestinationCIDR are
	// sent to: its first InternalIP of the destination's family, else its
	// first ExternalIP of that family.
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="must be an IPv4 or IPv6 address"
	NextHop string `json:"nextHop"`

	// NodeAddresses are the Node's status.addresses when the route was
	// written. The route controller compares them with the Node's current
	// ones and replaces the route when they differ.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	NodeAddresses []NodeAddress `json:"nodeAddresses,omitempty"`
}

// NodeAddress is one of a Node's status.addresses.
type NodeAddress struct {
	// Type is the address type: InternalIP, ExternalIP, Hostname, ...
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	Type string `json:"type"`
	// Address is the address itself.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Address string `json:"address"`
}

// RouteStatus is what routers report.
type RouteStatus struct {
	// Hosts is each router's view: its Programmed condition. A router in
	// node placement does not program (or report) its own node's routes.
	// +listType=map
	// +listMapKey=name
	// +optional
	Hosts []RouteHostStatus `json:"hosts,omitempty"`
}

// RouteHostStatus is one router's report.
type RouteHostStatus struct {
	// Name of the host (its router's --host-name).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Conditions: Programmed (the host's kernel holds this generation's
	// route).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// RouteList is a list of Routes.
//
// +kubebuilder:object:root=true
type RouteList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Route `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(scheme *runtime.Scheme) error {
		scheme.AddKnownTypes(SchemeGroupVersion, &Route{}, &RouteList{})
		return nil
	})
}

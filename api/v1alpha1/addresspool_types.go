package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// AddressPool is one [Pool] of the cloud-config as the controller manager
// sees it: its ranges, and how many of their addresses Services hold. It
// is read-only: the controller manager writes it when allocations or the
// cloud-config change, and deletes it when the pool leaves the
// cloud-config. Edit the cloud-config, not this object.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=gpool;gpools,categories=groundcloud
// +kubebuilder:printcolumn:name="Families",type=string,JSONPath=`.status.summary.families`,description="Address families, in the order of the other columns"
// +kubebuilder:printcolumn:name="Size",type=string,JSONPath=`.status.summary.size`,description="Addresses in the ranges, per family"
// +kubebuilder:printcolumn:name="Used",type=string,JSONPath=`.status.summary.used`,description="Addresses held by Services, per family"
// +kubebuilder:printcolumn:name="Free",type=string,JSONPath=`.status.summary.free`,description="Addresses left, per family"
// +kubebuilder:printcolumn:name="Orphaned",type=integer,JSONPath=`.status.orphaned`,description="Addresses kept by Services outside the pools their namespace may use, given from this pool"
// +kubebuilder:printcolumn:name="Ranges",type=string,JSONPath=`.status.summary.ranges`
// +kubebuilder:printcolumn:name="Auto-Assign",type=boolean,JSONPath=`.spec.autoAssign`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AddressPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   AddressPoolSpec   `json:"spec"`
	Status AddressPoolStatus `json:"status,omitempty"`
}

// AddressPoolSpec is the pool as the cloud-config defines it.
type AddressPoolSpec struct {
	// Ranges are the pool's address ranges, in file order: a CIDR or
	// first-last.
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MaxLength=91
	// +listType=atomic
	Ranges []string `json:"ranges"`
	// AutoAssign: Services that name no pool get addresses from it.
	AutoAssign bool `json:"autoAssign"`
	// Namespaces may use the pool; empty: every namespace.
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=atomic
	// +optional
	Namespaces []string `json:"namespaces,omitempty"`
}

// AddressPoolStatus is the pool's usage.
type AddressPoolStatus struct {
	// Families is the usage of each address family the pool has ranges of.
	// +kubebuilder:validation:MaxItems=2
	// +listType=map
	// +listMapKey=family
	// +optional
	Families []FamilyUsage `json:"families,omitempty"`
	// Orphaned counts the addresses given from this pool that Services keep
	// although the current pools would not give them any more
	// (docs/controller-manager.md#orphaned-addresses): every address of
	// such a Service, as the metric groundcloud_pool_orphaned_addresses.
	// Those still in the ranges also count as used.
	Orphaned int64 `json:"orphaned"`
	// Summary is the same as text, for kubectl get.
	// +optional
	Summary UsageSummary `json:"summary,omitempty"`
}

// FamilyUsage is the usage of one address family of a pool.
type FamilyUsage struct {
	// Family is IPv4 or IPv6.
	// +kubebuilder:validation:Enum=IPv4;IPv6
	Family string `json:"family"`
	// Size is the number of addresses in the family's ranges, saturating
	// at 2^63-1 (a large IPv6 range).
	Size int64 `json:"size"`
	// Used is the number of those addresses held by Services.
	Used int64 `json:"used"`
	// InUse is the number of the other addresses that a station which is
	// no load-balancer host claims on the link (the agents' address
	// conflict detection): never handed out.
	// +optional
	InUse int64 `json:"inUse,omitempty"`
	// Free is Size - Used - InUse.
	Free int64 `json:"free"`
}

// UsageSummary is an AddressPool as text, one value per family in the
// order of Families joined by commas ("20,256").
type UsageSummary struct {
	// +kubebuilder:validation:MaxLength=16
	// +optional
	Families string `json:"families,omitempty"`
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Size string `json:"size,omitempty"`
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Used string `json:"used,omitempty"`
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Free string `json:"free,omitempty"`
	// Ranges are the spec's, joined by commas.
	// +kubebuilder:validation:MaxLength=100000
	// +optional
	Ranges string `json:"ranges,omitempty"`
}

// AddressPoolList is a list of AddressPools.
//
// +kubebuilder:object:root=true
type AddressPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AddressPool `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(scheme *runtime.Scheme) error {
		scheme.AddKnownTypes(SchemeGroupVersion, &AddressPool{}, &AddressPoolList{})
		return nil
	})
}

package cloudroutes

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/routeapi"
)

// Build returns the Route object the controller manager writes for an
// upstream route (from CreateRoute).
func Build(r *cloudprovider.Route) (*v1alpha1.Route, error) {
	if r.TargetNode == "" {
		return nil, errors.New("route has no target node")
	}
	dst, err := routeapi.ParseCIDR(r.DestinationCIDR)
	if err != nil {
		return nil, err
	}
	hop, err := routeapi.NextHop(r.TargetNodeAddresses, dst.Addr().Is4())
	if err != nil {
		return nil, fmt.Errorf("route %s to node %s: %w", dst, r.TargetNode, err)
	}
	obj := &v1alpha1.Route{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "Route"},
		ObjectMeta: metav1.ObjectMeta{Name: routeapi.ObjectName(string(r.TargetNode), dst)},
		Spec: v1alpha1.RouteSpec{
			NodeName:        string(r.TargetNode),
			DestinationCIDR: dst.String(),
			NextHop:         hop.String(),
		},
	}
	for _, a := range r.TargetNodeAddresses {
		obj.Spec.NodeAddresses = append(obj.Spec.NodeAddresses, v1alpha1.NodeAddress{Type: string(a.Type), Address: a.Address})
	}
	return obj, nil
}

// ToCloud is what ListRoutes reports for a Route object. A route whose
// machine is gone is a blackhole, as a cloud reports a route whose target
// instance no longer exists: no target node, Blackhole set, so that the
// route controller deletes it. Node addresses are reported
// (EnableNodeAddresses) so that the route controller replaces a route
// when its Node's addresses change.
func ToCloud(obj *v1alpha1.Route, machineGone bool) *cloudprovider.Route {
	r := &cloudprovider.Route{
		Name:                obj.Name,
		TargetNode:          types.NodeName(obj.Spec.NodeName),
		DestinationCIDR:     obj.Spec.DestinationCIDR,
		EnableNodeAddresses: true,
		TargetNodeAddresses: []v1.NodeAddress{},
	}
	for _, a := range obj.Spec.NodeAddresses {
		r.TargetNodeAddresses = append(r.TargetNodeAddresses, v1.NodeAddress{Type: v1.NodeAddressType(a.Type), Address: a.Address})
	}
	if machineGone {
		r.TargetNode, r.Blackhole = "", true
	}
	return r
}

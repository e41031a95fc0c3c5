package backends

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

var _ cache.TransformFunc = Transform

// Transform is a cache.TransformFunc for Node informers whose readers only
// apply Of (and read a Node's name and labels): it keeps the name,
// resourceVersion, labels, deletion timestamp, providerID, taints,
// addresses and the ConditionPodRoutes condition (without its heartbeat
// time), and drops the rest (managedFields, annotations, images, other
// conditions, capacity, daemon endpoints, node info), which is most of a
// Node and changes with every kubelet status report. Other objects pass
// unchanged.
func Transform(obj any) (any, error) {
	n, ok := obj.(*v1.Node)
	if !ok {
		return obj, nil
	}
	return &v1.Node{
		TypeMeta: n.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              n.Name,
			UID:               n.UID,
			ResourceVersion:   n.ResourceVersion,
			Labels:            n.Labels,
			DeletionTimestamp: n.DeletionTimestamp,
		},
		Spec:   v1.NodeSpec{ProviderID: n.Spec.ProviderID, Taints: n.Spec.Taints, Unschedulable: n.Spec.Unschedulable},
		Status: v1.NodeStatus{Addresses: n.Status.Addresses, Conditions: podRoutes(n.Status.Conditions)},
	}, nil
}

// podRoutes is the ConditionPodRoutes condition of conds, without its
// heartbeat time; nil if there is none.
func podRoutes(conds []v1.NodeCondition) []v1.NodeCondition {
	for _, c := range conds {
		if c.Type == ConditionPodRoutes {
			c.LastHeartbeatTime = metav1.Time{}
			return []v1.NodeCondition{c}
		}
	}
	return nil
}

package agent

import "k8s.io/apimachinery/pkg/labels"

// HostLabels are the labels the pools' and peers' host selectors are
// matched against when they are fixed (--host-labels), on a host that is
// not a Node. Without them the agent reads its own Node's labels from its
// Node informer (Config.HostLabels).
type HostLabels interface {
	Labels() labels.Set
}

// FixedLabels are the labels of a host that is not a Node.
type FixedLabels labels.Set

// Labels returns them.
func (f FixedLabels) Labels() labels.Set { return labels.Set(f) }

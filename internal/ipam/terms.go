package ipam

import (
	"slices"

	"k8s.io/apimachinery/pkg/types"
)

// Terms returns the sharing key and the ports a Service holds its addresses
// with, as last assigned or restored, so that its durable record can be
// written again without assigning.
func (a *Allocator) Terms(key types.NamespacedName) (sharingKey string, ports []Port, ok bool) {
	rec, ok := a.records[key]
	if !ok {
		return "", nil, false
	}
	return rec.sharingKey, slices.Clone(rec.ports), true
}

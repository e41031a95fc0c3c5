package ipam

import (
	"slices"

	"k8s.io/apimachinery/pkg/types"

	"github.com/groundcloud/groundcloud/internal/config"
)

// Terms are what a Service holds its addresses on, besides the addresses:
// as last assigned or restored.
type Terms struct {
	SharingKey string
	Ports      []Port
	// Forwarding is the Service's own forwarding, as requested ("": its
	// pool's).
	Forwarding config.Forwarding
	// Served is the forwarding its addresses are served with (see
	// forwarding.go): its own, else its pool's, else, for an orphan kept
	// outside its pool, what it was served with before. Restore reads it
	// from the durable record, and uses it only for such an orphan.
	Served config.Forwarding
}

// Terms returns what a Service holds its addresses on, so that its durable
// record can be written again without assigning.
func (a *Allocator) Terms(key types.NamespacedName) (Terms, bool) {
	rec, ok := a.records[key]
	if !ok {
		return Terms{}, false
	}
	return Terms{SharingKey: rec.sharingKey, Ports: slices.Clone(rec.ports), Forwarding: rec.forwarding, Served: a.served(rec)}, true
}

package ipam

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/groundcloud/groundcloud/internal/annotation"
	"github.com/groundcloud/groundcloud/internal/config"
)

// ServiceForwarding reads the forwarding svc asks for with annotation
// groundcloud.io/forwarding: "" when it sets none. A value it cannot use
// is returned as "" (the pool's) with an error that says why; it does not
// make the request invalid.
func ServiceForwarding(svc *v1.Service) (config.Forwarding, error) {
	raw, ok := svc.Annotations[annotation.Forwarding]
	if !ok {
		return "", nil
	}
	switch f := config.Forwarding(strings.ToLower(strings.TrimSpace(raw))); f {
	case config.ForwardingPassthrough, config.ForwardingProxy:
		return f, nil
	}
	return "", fmt.Errorf("annotation %s: %q is not a forwarding mode; use passthrough or proxy", annotation.Forwarding, raw)
}

// poolForwarding is the forwarding of p's Services that set none.
func poolForwarding(p *config.Pool) config.Forwarding {
	if p.Forwarding == "" {
		return config.ForwardingPassthrough
	}
	return p.Forwarding
}

// servingPool is the pool whose settings rec's addresses are served with:
// its own, while it exists and contains all of them (whether or not it
// still allows the namespace); nil for an orphan kept outside it.
func (a *Allocator) servingPool(rec *record) *pool {
	p := a.byName[rec.alloc.Pool]
	if p == nil {
		return nil
	}
	for _, addr := range rec.alloc.Addresses {
		if !p.contains(addr) {
			return nil
		}
	}
	return p
}

// served is the forwarding rec's addresses are served with: its own, else
// its serving pool's, else what it was served with before its pool stopped
// serving it.
func (a *Allocator) served(rec *record) config.Forwarding {
	if rec.forwarding != "" {
		return rec.forwarding
	}
	if p := a.servingPool(rec); p != nil {
		return poolForwarding(p.Pool)
	}
	if rec.served == "" {
		return config.ForwardingPassthrough
	}
	return rec.served
}

// ServingPool returns the pool whose settings (forwarding, announce, the
// hosts that serve it) the Service's addresses are served with: its pool,
// while that exists and contains them all, whether or not it still allows
// the namespace. It reports false for a Service that holds nothing, and
// for an orphan whose pool is gone or no longer contains its addresses:
// that one is served as it was before (Terms.Served for its forwarding)
// until it is resolved.
func (a *Allocator) ServingPool(key types.NamespacedName) (*config.Pool, bool) {
	rec, ok := a.records[key]
	if !ok {
		return nil, false
	}
	if p := a.servingPool(rec); p != nil {
		return p.Pool, true
	}
	return nil, false
}

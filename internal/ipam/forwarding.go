package ipam

import (
	"fmt"
	"net/netip"
	"slices"
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

// forwardingIn is the forwarding req's addresses would be served with in p.
func (req *Request) forwardingIn(p *pool) config.Forwarding {
	if req.Forwarding != "" {
		return req.Forwarding
	}
	return poolForwarding(p.Pool)
}

// sameForwarding refuses addr to req, which would be served with fwd, when
// another Service holding it is served otherwise. Hosts choose how to
// announce and forward an address, not a port: under BGP a passthrough
// address is advertised by every host, so a proxy Service beside it would
// have its flows sent to hosts without their conntrack state. A Service
// that holds addr already keeps it while it asks for the forwarding it
// asked for before: a pool edit, or records from before this rule, may
// leave an address forwarded both ways, and that must move no one.
func (a *Allocator) sameForwarding(addr netip.Addr, req *Request, fwd config.Forwarding) error {
	h := a.held[addr]
	if h == nil {
		return nil
	}
	if slices.Contains(h.owners, req.Key) && a.records[req.Key].forwarding == req.Forwarding {
		return nil
	}
	var others []config.Forwarding
	var by types.NamespacedName
	for _, o := range h.owners {
		if f := a.served(a.records[o]); o != req.Key && !slices.Contains(others, f) {
			others, by = append(others, f), o
		}
	}
	switch {
	case len(others) > 1:
		return fmt.Errorf("%w: %s is forwarded both passthrough and proxy by the Services sharing it (after an edit of their pool); use another address",
			ErrSharingConflict, addr)
	case len(others) == 1 && others[0] != fwd:
		return fmt.Errorf("%w: %s is forwarded %s by %s, not %s; Services that share an address must forward it alike: set annotation %s to %s, or use another address",
			ErrSharingConflict, addr, others[0], by, fwd, annotation.Forwarding, others[0])
	}
	return nil
}

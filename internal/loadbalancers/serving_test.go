package loadbalancers

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/annotation"
	"github.com/groundcloud/groundcloud/internal/config"
	"github.com/groundcloud/groundcloud/internal/lbapi"
)

// edgeConfig has pool "default", with defaultRanges, and pool "edge",
// with edgeRanges, announced over BGP by some hosts with proxy forwarding.
func edgeConfig(defaultRanges, edgeRanges string) string {
	return "[Global]\nregion = lab\n\n" +
		"[Pool \"default\"]\n" + defaultRanges + "\n" +
		"[Pool \"edge\"]\n" + edgeRanges + "auto-assign = false\nannounce = bgp\nforwarding = proxy\n" +
		"hosts = edge.node-restriction.kubernetes.io/edge=true\nbgp-community = 64512:100\nbgp-local-preference = 200\n\n" +
		"[BGPPeer \"tor\"]\naddress = 10.0.0.1\nasn = 64512\nlocal-asn = 64513\n"
}

const (
	defaultRanges = "addresses = 192.0.2.210-192.0.2.211\n"
	edgeRanges    = "addresses = 192.0.2.200-192.0.2.201\n"
	edgeShrunk    = "addresses = 192.0.2.201/32\n"
)

// edgeServed is how the edge pool's addresses are served.
func edgeServed() (string, *v1alpha1.Announce) {
	lp := int64(200)
	return v1alpha1.ForwardingProxy, &v1alpha1.Announce{
		Mode: v1alpha1.AnnounceBGP, HostSelector: "edge.node-restriction.kubernetes.io/edge=true",
		Communities: []string{"64512:100"}, LocalPreference: &lp,
	}
}

// TestOrphanKeepsHowItIsServed: a Service whose address falls outside
// every pool (its pool removed, or shrunk) keeps being served as its pool
// served it, announce and forwarding, after a re-ensure and after a
// restart, until it is resolved.
func TestOrphanKeepsHowItIsServed(t *testing.T) {
	for _, tt := range []struct {
		name   string
		reload string
	}{
		{"pool removed", "[Global]\nregion = lab\n\n[Pool \"default\"]\n" + defaultRanges},
		{"pool shrunk", edgeConfig(defaultRanges, edgeShrunk)},
		{"pool shrunk and made l2 passthrough", "[Global]\nregion = lab\n\n[Pool \"default\"]\n" + defaultRanges +
			"\n[Pool \"edge\"]\n" + edgeShrunk + "auto-assign = false\n"},
		{"range moved to another pool", edgeConfig(defaultRanges+"addresses = 192.0.2.200/32\n", edgeShrunk)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			dyn := newFakeDynamic()
			emulateStatusApply(dyn)
			var cfg atomic.Pointer[config.Config]
			cfg.Store(mustParse(t, edgeConfig(defaultRanges, edgeRanges)))
			m, stop := startManagerWith(t, dyn, &cfg, nil)
			svc := newSvc("web", withAnnotation(annotation.Pool, "edge"))
			if _, err := m.Ensure(ctx, svc, nil); err != nil {
				t.Fatal(err)
			}
			wantFwd, wantAnnounce := edgeServed()
			check := func(when string) {
				t.Helper()
				lb, err := lbapi.NewClient(dyn).Get(ctx, "default", "web")
				if err != nil {
					t.Fatal(err)
				}
				if lb.Spec.Addresses[0] != "192.0.2.200" || lb.Spec.Forwarding != wantFwd {
					t.Errorf("%s: addresses %v, forwarding %q; want 192.0.2.200 kept, forwarding %q", when, lb.Spec.Addresses, lb.Spec.Forwarding, wantFwd)
				}
				if diff := cmp.Diff(wantAnnounce, lb.Spec.Announce); diff != "" {
					t.Errorf("%s: spec.announce (-as the pool served it +got):\n%s", when, diff)
				}
			}
			check("before the reload")

			cfg.Store(mustParse(t, tt.reload))
			if _, err := m.Ensure(ctx, svc, nil); err != nil {
				t.Fatal(err)
			}
			check("re-ensured after the reload")

			stop() // a restart, over the same objects
			m, _ = startManagerWith(t, dyn, &cfg, nil)
			if _, err := m.Ensure(ctx, svc, nil); err != nil {
				t.Fatal(err)
			}
			check("re-ensured after a restart")
		})
	}
}

// edgePool is a cloud-config with pool "default" and pool "edge", whose
// settings are body.
func edgePool(body string) string {
	return "[Global]\nregion = lab\n\n[Pool \"default\"]\n" + defaultRanges + "\n" +
		"[Pool \"edge\"]\n" + edgeRanges + "auto-assign = false\n" + body + "\n" +
		"[BGPPeer \"tor\"]\naddress = 10.0.0.1\nasn = 64512\nlocal-asn = 64513\n"
}

const edgeBody = "announce = bgp\nforwarding = proxy\nhosts = edge.node-restriction.kubernetes.io/edge=true\nbgp-community = 64512:100\nbgp-local-preference = 200\n"

// TestPoolEditReachesLoadBalancers: a reload that changes a pool setting
// a LoadBalancer's spec carries rewrites the LoadBalancers of that pool at
// once, without any change to their Services; a Service's own forwarding
// stays, and the LoadBalancers of other pools are not written.
func TestPoolEditReachesLoadBalancers(t *testing.T) {
	for _, tt := range []struct {
		name string
		body string
	}{
		{"announce l2", "forwarding = proxy\nhosts = edge.node-restriction.kubernetes.io/edge=true\n"},
		{"hosts", strings.Replace(edgeBody, "edge.node-restriction.kubernetes.io/edge=true", "edge.node-restriction.kubernetes.io/edge=false", 1)},
		{"forwarding", strings.Replace(edgeBody, "forwarding = proxy", "forwarding = passthrough", 1)},
		{"communities", strings.Replace(edgeBody, "64512:100", "64512:200\nbgp-community = 64512:300", 1)},
		{"local preference", strings.Replace(edgeBody, "= 200", "= 300", 1)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var cfg atomic.Pointer[config.Config]
			cfg.Store(mustParse(t, edgePool(edgeBody)))
			h := startManagerConfig(t, newFakeDynamic(), &cfg)
			h.mustEnsure(newSvc("web", withAnnotation(annotation.Pool, "edge")))
			h.mustEnsure(newSvc("own", withAnnotation(annotation.Pool, "edge"), withAnnotation(annotation.Forwarding, "proxy")))
			h.mustEnsure(newSvc("other"))
			waitCached(t, h.m, 3)
			h.dyn.ClearActions()

			edited := mustParse(t, edgePool(tt.body))
			cfg.Store(edited)
			pool, _ := edited.Pool("edge")
			want := Announce(pool)
			h.eventually("web's spec to follow the pool", func() bool {
				spec := h.object("web").Spec
				return spec.Forwarding == apiForwarding(pool.Forwarding) && cmp.Equal(spec.Announce, want)
			})
			h.eventually("own's announce to follow the pool", func() bool {
				return cmp.Equal(h.object("own").Spec.Announce, want)
			})
			if got := h.object("own").Spec.Forwarding; got != v1alpha1.ForwardingProxy {
				t.Errorf("own's forwarding = %q, want its own Proxy", got)
			}
			h.settle("other")
			for _, w := range apiWrites(h.dyn) {
				if strings.HasSuffix(w, " other") {
					t.Errorf("an edit of pool edge wrote %q", w)
				}
			}
		})
	}
}

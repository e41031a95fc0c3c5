package ipam

import (
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/groundcloud/groundcloud/internal/annotation"
	"github.com/groundcloud/groundcloud/internal/config"
)

const (
	passthrough = config.ForwardingPassthrough
	proxy       = config.ForwardingProxy
)

func TestServiceForwarding(t *testing.T) {
	for _, tt := range []struct {
		name    string
		svc     *v1.Service
		want    config.Forwarding
		wantErr string
	}{
		{"none", newService("web"), "", ""},
		{"proxy", newService("web", withForwarding("proxy")), proxy, ""},
		{"any case, with spaces", newService("web", withForwarding(" Passthrough ")), passthrough, ""},
		{"not a mode: none, and an error", newService("web", withForwarding("dsr")), "", `"dsr" is not a forwarding mode`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ServiceForwarding(tt.svc)
			if got != tt.want {
				t.Errorf("ServiceForwarding = %q, want %q", got, tt.want)
			}
			if (err == nil) != (tt.wantErr == "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error = %v, want one containing %q", err, tt.wantErr)
			}
			if req, err := RequestFromService(tt.svc); err != nil || req.Forwarding != tt.want {
				t.Errorf("RequestFromService = %q, %v; want forwarding %q and no error", req.Forwarding, err, tt.want)
			}
		})
	}
}

// served is the forwarding the Allocator says web's addresses are served
// with.
func served(t *testing.T, a *Allocator, name string) config.Forwarding {
	t.Helper()
	terms, ok := a.Terms(key(name))
	if !ok {
		t.Fatalf("%s holds nothing", name)
	}
	return terms.Served
}

func TestServedForwarding(t *testing.T) {
	for _, tt := range []struct {
		name string
		pool *config.Pool
		svc  *v1.Service
		want config.Forwarding
	}{
		{"the pool's default", newPool("p", ranges("10.0.0.0/30")), newService("web"), passthrough},
		{"the pool's proxy", newPool("p", ranges("10.0.0.0/30"), forwarding(proxy)), newService("web"), proxy},
		{"the Service's over the pool's", newPool("p", ranges("10.0.0.0/30"), forwarding(proxy)), newService("web", withForwarding("passthrough")), passthrough},
		{"a bad annotation: the pool's", newPool("p", ranges("10.0.0.0/30"), forwarding(proxy)), newService("web", withForwarding("dsr")), proxy},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := New([]*config.Pool{tt.pool})
			mustAssign(t, a, tt.svc)
			if got := served(t, a, "web"); got != tt.want {
				t.Errorf("served %q, want %q", got, tt.want)
			}
		})
	}
}

// TestOrphanKeepsItsForwarding: a pool edit changes the forwarding of the
// Services it serves; an orphan outside its pool keeps the forwarding it
// was served with, through reloads, re-assigns and a restore, until a pool
// serves it again. One whose pool no longer allows its namespace is still
// served by the pool.
func TestOrphanKeepsItsForwarding(t *testing.T) {
	proxyPool := newPool("p", ranges("10.0.0.0/30"), forwarding(proxy))
	a := New([]*config.Pool{proxyPool})
	mustAssign(t, a, newService("web"))
	mustAssign(t, a, newService("api", inNamespace("team")))

	a.SetPools([]*config.Pool{newPool("p", ranges("10.0.0.0/30"), namespaces("default"))})
	if got := served(t, a, "web"); got != passthrough {
		t.Fatalf("after the pool turned passthrough: %q, want passthrough", got)
	}
	if got := served(t, a, "team/api"); got != passthrough {
		t.Errorf("orphan of a pool that no longer allows its namespace: %q, want the pool's passthrough", got)
	}

	a.SetPools([]*config.Pool{proxyPool})
	a.SetPools([]*config.Pool{newPool("q", ranges("10.0.1.0/30"))}) // p is gone
	for _, step := range []func(){
		func() {},
		func() { mustAssign(t, a, newService("web")) },
		func() { a.SetPools([]*config.Pool{newPool("q", ranges("10.0.1.0/30"))}) },
		func() {
			terms, _ := a.Terms(key("web"))
			b := New([]*config.Pool{newPool("q", ranges("10.0.1.0/30"))})
			if err := b.Restore(key("web"), alloc("p", "10.0.0.0"), terms); err != nil {
				t.Fatal(err)
			}
			a = b
		},
	} {
		step()
		if got := served(t, a, "web"); got != proxy {
			t.Fatalf("orphan of a removed pool: %q, want the proxy it was served with", got)
		}
		if _, ok := a.ServingPool(key("web")); ok {
			t.Fatal("ServingPool of an orphan outside its pool says it is served by one")
		}
	}

	a.SetPools([]*config.Pool{newPool("p", ranges("10.0.0.0/30"))}) // back, passthrough
	if got := served(t, a, "web"); got != passthrough {
		t.Errorf("served by its pool again: %q, want the pool's passthrough", got)
	}
}

// TestSharersKeepTheirAddress: the Services on an address must forward it
// alike when one joins it or changes its own forwarding; a pool edit that
// makes them differ, or records from before the rule, move no one.
func TestSharersKeepTheirAddress(t *testing.T) {
	x := newService("x", withSharing("k"), withPorts("TCP/80"))
	y := newService("y", withIPs("10.0.0.0"), withSharing("k"), withPorts("TCP/443"), withForwarding("passthrough"))

	t.Run("a pool edit", func(t *testing.T) {
		a := New([]*config.Pool{newPool("p", ranges("10.0.0.0/30"))})
		mustAssign(t, a, x)
		mustAssign(t, a, y)
		a.SetPools([]*config.Pool{newPool("p", ranges("10.0.0.0/30"), forwarding(proxy))})
		for _, svc := range []*v1.Service{x, y} {
			if got := mustAssign(t, a, svc); got.Addresses[0] != addrs("10.0.0.0")[0] {
				t.Errorf("%s moved to %v after a pool edit", svc.Name, got.Addresses)
			}
		}
		if fx, fy := served(t, a, "x"), served(t, a, "y"); fx != proxy || fy != passthrough {
			t.Errorf("served x %q, y %q; want the pool's proxy and y's own passthrough", fx, fy)
		}
		for _, f := range []string{"proxy", "passthrough"} {
			z := newService("z", withIPs("10.0.0.0"), withSharing("k"), withPorts("TCP/53"), withForwarding(f))
			if _, err := a.Assign(mustRequest(t, z)); !errors.Is(err, ErrSharingConflict) {
				t.Errorf("a %s Service joining an address forwarded both ways: %v, want ErrSharingConflict", f, err)
			}
		}
	})

	t.Run("a sharer's own edit", func(t *testing.T) {
		a := New([]*config.Pool{newPool("p", ranges("10.0.0.0/30"))})
		mustAssign(t, a, x)
		mustAssign(t, a, y)
		edited := y.DeepCopy()
		edited.Annotations[annotation.Forwarding] = "proxy"
		if _, err := a.Assign(mustRequest(t, edited)); !errors.Is(err, ErrSharingConflict) {
			t.Fatalf("y asking for proxy beside x's passthrough: %v, want ErrSharingConflict", err)
		}
		if got := served(t, a, "y"); got != passthrough {
			t.Errorf("after the refused edit y is served %q, want passthrough kept", got)
		}
	})

	t.Run("records from before the rule", func(t *testing.T) {
		a := New([]*config.Pool{newPool("p", ranges("10.0.0.0/30"))})
		for _, r := range []struct {
			name string
			t    Terms
		}{
			{"x", Terms{SharingKey: "k", Ports: []Port{{"TCP", 80}}}},
			{"y", Terms{SharingKey: "k", Ports: []Port{{"TCP", 443}}, Forwarding: proxy}},
		} {
			if err := a.Restore(key(r.name), alloc("p", "10.0.0.0"), r.t); err != nil {
				t.Fatal(err)
			}
		}
		proxyY := newService("y", withIPs("10.0.0.0"), withSharing("k"), withPorts("TCP/443"), withForwarding("proxy"))
		for _, svc := range []*v1.Service{x, proxyY} {
			if got := mustAssign(t, a, svc); got.Addresses[0] != addrs("10.0.0.0")[0] {
				t.Errorf("%s moved to %v", svc.Name, got.Addresses)
			}
		}
	})
}

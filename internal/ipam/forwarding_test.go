package ipam

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

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

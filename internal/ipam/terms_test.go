package ipam

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/groundcloud/groundcloud/internal/config"
)

func TestTerms(t *testing.T) {
	a := New([]*config.Pool{newPool("a", ranges("10.0.0.0/30"))})
	if _, _, ok := a.Terms(key("web")); ok {
		t.Fatal("Terms of a Service that holds nothing")
	}
	mustAssign(t, a, newService("web", withSharing("k"), withPorts("UDP/53", "TCP/80")))
	sharingKey, ports, ok := a.Terms(key("web"))
	want := []Port{{Protocol: "TCP", Port: 80}, {Protocol: "UDP", Port: 53}}
	if !ok || sharingKey != "k" || !cmp.Equal(ports, want) {
		t.Fatalf("Terms = %q, %v, %v; want k, %v", sharingKey, ports, ok, want)
	}
	ports[0].Port = 1
	if _, again, _ := a.Terms(key("web")); !cmp.Equal(again, want) {
		t.Errorf("ports changed through a returned slice: %v", again)
	}
	a.Release(key("web"))
	if _, _, ok := a.Terms(key("web")); ok {
		t.Error("Terms after Release")
	}
}

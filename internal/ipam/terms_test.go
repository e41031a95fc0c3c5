package ipam

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/groundcloud/groundcloud/internal/config"
)

func TestTerms(t *testing.T) {
	a := New([]*config.Pool{newPool("a", ranges("10.0.0.0/30"))})
	if _, ok := a.Terms(key("web")); ok {
		t.Fatal("Terms of a Service that holds nothing")
	}
	mustAssign(t, a, newService("web", withSharing("k"), withPorts("UDP/53", "TCP/80")))
	got, ok := a.Terms(key("web"))
	want := Terms{SharingKey: "k", Ports: []Port{{Protocol: "TCP", Port: 80}, {Protocol: "UDP", Port: 53}}, Served: config.ForwardingPassthrough}
	if diff := cmp.Diff(want, got); !ok || diff != "" {
		t.Fatalf("Terms = %v (-want +got):\n%s", ok, diff)
	}
	got.Ports[0].Port = 1
	if again, _ := a.Terms(key("web")); !cmp.Equal(again, want) {
		t.Errorf("ports changed through a returned slice: %v", again.Ports)
	}
	a.Release(key("web"))
	if _, ok := a.Terms(key("web")); ok {
		t.Error("Terms after Release")
	}
}

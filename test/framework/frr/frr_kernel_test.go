package frr

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

// FRR runs in a lab host with its logs in a test's temporary directory
// (mode 0700, which the daemons' user cannot enter), from a directory of
// its own that no other user may enter, answers vtysh, and leaves its logs
// there when stopped.
func TestFRRInLabHost(t *testing.T) {
	if err := Available(); err != nil {
		t.Fatal(err)
	}
	l := netlab.NewT(t, netlab.Options{})
	h := l.AddHostT(t, "frr", netlab.HostOptions{Forwarding: true})
	logs := t.TempDir()
	r, err := Start(t.Context(), h, logs, "frr defaults datacenter\nrouter bgp 64512\n bgp router-id "+h.Addr4.String()+"\n")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop() })
	checkPrivate(t, r.Dir())
	out, err := r.VTY(t.Context(), "show bgp summary")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "64512") && !strings.Contains(string(out), "No BGP neighbors") {
		t.Errorf("show bgp summary says:\n%s", out)
	}
	if err := r.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if _, err := os.Stat(filepath.Join(logs, "zebra.log")); err != nil {
		t.Errorf("zebra's log is not kept: %v", err)
	}
}

// Configure changes the running router: a BFD profile and a peer that
// uses it show in bfdd's sessions; a command vtysh refuses is an error.
func TestConfigure(t *testing.T) {
	if err := Available(); err != nil {
		t.Fatal(err)
	}
	l := netlab.NewT(t, netlab.Options{})
	h := l.AddHostT(t, "frr", netlab.HostOptions{})
	peer := l.AddHostT(t, "peer", netlab.HostOptions{})
	r, err := Start(t.Context(), h, t.TempDir(), "frr defaults datacenter\n")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop() })
	if err := r.Configure(t.Context(), "bfd", "profile fast", "transmit-interval 100", "exit",
		"peer "+peer.Addr4.String()+" local-address "+h.Addr4.String(), "profile fast"); err != nil {
		t.Fatal(err)
	}
	out, err := r.VTY(t.Context(), "show bfd peer "+peer.Addr4.String()+" json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"transmit-interval":100`) {
		t.Errorf("the peer does not use the profile: %s", out)
	}
	peers, err := r.BFDPeers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if p := peers[peer.Addr4]; p.Status != "down" || p.Local != h.Addr4 {
		t.Errorf("bfdd's session: %+v, want down (nobody answers) from %s", p, h.Addr4)
	}
	if err := r.Configure(t.Context(), "bfd", "no such command"); err == nil {
		t.Error("a command vtysh refuses is no error")
	}
}

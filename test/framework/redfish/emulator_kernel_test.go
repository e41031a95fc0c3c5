package redfish

import (
	"context"
	"crypto/tls"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

const (
	node1 = "6c2d3c8e-6f0e-4c55-9d3c-000000000001"
	node2 = "6c2d3c8e-6f0e-4c55-9d3c-000000000002"
)

// The emulator starts in a lab host with one system per machine, serves
// their PowerState over HTTPS behind basic authentication, and a power
// action through its API changes PowerState (and only that system's).
func TestEmulatorPowerActions(t *testing.T) {
	l := netlab.NewT(t, netlab.Options{})
	if err := Available(); err != nil {
		t.Fatal(err)
	}
	h := l.AddHostT(t, "bmc", netlab.HostOptions{})
	e, err := Start(t.Context(), h, t.TempDir(), Options{
		Systems:  []System{{ID: node1, Name: "node-1", On: true}, {ID: node2, Name: "node-2", On: true}},
		Username: "admin", Password: "s3cret",
		TLS: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Stop() })
	if !strings.HasPrefix(e.URL, "https://") {
		t.Fatalf("URL %s is not https", e.URL)
	}
	for _, id := range []string{node1, node2} {
		if got, err := e.PowerState(t.Context(), id); err != nil || got != "On" {
			t.Fatalf("system %s: PowerState %q, %v; want On", id, got, err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := e.Reset(ctx, node2, "ForceOff"); err != nil {
		t.Fatal(err)
	}
	if err := e.WaitPowerState(ctx, node2, "Off"); err != nil {
		t.Fatal(err)
	}
	if got, err := e.PowerState(ctx, node1); err != nil || got != "On" {
		t.Errorf("system %s after powering off the other: PowerState %q, %v; want On", node1, got, err)
	}
	if err := e.Reset(ctx, node2, "On"); err != nil {
		t.Fatal(err)
	}
	if err := e.WaitPowerState(ctx, node2, "On"); err != nil {
		t.Fatal(err)
	}
	checkRefused(t, e)
}

// Wrong credentials and a client that does not trust the emulator's
// authority are refused.
func checkRefused(t *testing.T, e *Emulator) {
	t.Helper()
	wrong := *e
	wrong.opts.Password = "wrong"
	if _, err := wrong.PowerState(t.Context(), node1); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("wrong password: %v, want 401", err)
	}
	c := e.Host.HTTPClient()
	c.Transport.(*http.Transport).TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	if _, err := c.Get(e.SystemURL(node1)); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("client without the authority: %v, want a certificate error", err)
	}
}

// Without TLS and authentication it serves plain HTTP, and Stop stops it.
func TestEmulatorPlainHTTP(t *testing.T) {
	l := netlab.NewT(t, netlab.Options{})
	if err := Available(); err != nil {
		t.Fatal(err)
	}
	h := l.AddHostT(t, "bmc", netlab.HostOptions{})
	e, err := Start(t.Context(), h, t.TempDir(), Options{Systems: []System{{ID: node1, Name: "node-1"}}, Port: 8443})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Stop() })
	if got, err := e.PowerState(t.Context(), node1); err != nil || got != "Off" {
		t.Fatalf("PowerState %q, %v; want Off", got, err)
	}
	if err := e.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if _, err := e.PowerState(t.Context(), node1); err == nil {
		t.Error("the emulator still answers after Stop")
	}
}

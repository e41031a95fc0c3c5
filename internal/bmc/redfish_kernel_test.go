package bmc

import (
	"context"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groundcloud/groundcloud/internal/config"
	"github.com/groundcloud/groundcloud/test/framework/netlab"
	"github.com/groundcloud/groundcloud/test/framework/redfish"
)

const (
	emuNode1 = "0b1f5a2e-35c4-4d0e-8a59-000000000001"
	emuNode2 = "0b1f5a2e-35c4-4d0e-8a59-000000000002"
)

// The poller, dialling from a controller-manager host, follows the power
// (and reads the model, serial number and BIOS version) of machines of a
// real Redfish BMC (sushy-tools' emulator, HTTPS with basic
// authentication, one system per machine): a power-off through the BMC's
// API shows as PoweredOff for that machine only; wrong credentials and a
// stopped BMC are errors with their reasons, never "off".
func TestPollerWithEmulatedBMC(t *testing.T) {
	RegisterMetrics()
	l := netlab.NewT(t, netlab.Options{})
	if err := redfish.Available(); err != nil {
		t.Fatal(err)
	}
	bmcHost := l.AddHostT(t, "bmc", netlab.HostOptions{})
	ccm := l.AddHostT(t, "ccm", netlab.HostOptions{})
	emu, err := redfish.Start(t.Context(), bmcHost, t.TempDir(), redfish.Options{
		Systems: []redfish.System{
			{ID: emuNode1, Name: "node-1", On: true, Model: "PowerEdge R640", SerialNumber: "CN7016", BIOSVersion: "2.19.1"},
			{ID: emuNode2, Name: "node-2", On: true},
		},
		Username: "admin", Password: "s3cret", TLS: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emu.Stop() })

	user, pass := writeFile(t, "user", "admin\n"), writeFile(t, "pass", "s3cret\n")
	machine := func(name, system string) *config.Machine {
		return &config.Machine{Name: name, BMC: &config.BMC{URL: emu.URL, System: system,
			UsernameFile: user, PasswordFile: pass, CAFile: emu.CAFile, Timeout: time.Second, PollInterval: time.Second}}
	}
	wrong := machine("wrong-password", emuNode1)
	wrong.BMC.PasswordFile = writeFile(t, "wrong", "guess\n")
	var cfg atomic.Pointer[config.Config]
	cfg.Store(cfgOf(machine("node-1", emuNode1), machine("node-2", redfish.SystemPath(emuNode2)), wrong))
	p := NewPoller(cfg.Load, Redfish{DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
		return ccm.DialTCP(ctx, netip.MustParseAddrPort(addr))
	}})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	// node-1's BMC tells its model, serial number and BIOS version;
	// node-2's none of them.
	for m, want := range map[string]Answer{
		"node-1": {PowerState: "On", Model: "PowerEdge R640", SerialNumber: "CN7016", BIOSVersion: "2.19.1"},
		"node-2": {PowerState: "On"},
	} {
		s := waitStatusFor(t, p, m, 20*time.Second, func(s Status, ok bool) bool { return ok && s.Err == nil })
		if s.Answer != want {
			t.Fatalf("%s: %+v, want %+v", m, s.Answer, want)
		}
	}
	w := waitStatusFor(t, p, "wrong-password", 20*time.Second, func(s Status, ok bool) bool { return ok })
	if w.Reason != ReasonUnauthorized || w.PoweredOff(time.Now()) {
		t.Errorf("wrong password: %+v, want reason %s", w, ReasonUnauthorized)
	}

	if err := emu.Reset(t.Context(), emuNode2, "ForceOff"); err != nil {
		t.Fatal(err)
	}
	// The emulator applies a power action 1 to 11 seconds later.
	waitStatusFor(t, p, "node-2", 30*time.Second, func(s Status, ok bool) bool { return ok && s.PoweredOff(time.Now()) })
	if s, _ := p.Status("node-1"); s.PoweredOff(time.Now()) || s.Answer.PowerState != "On" {
		t.Errorf("node-1 after node-2's power-off: %+v", s)
	}

	if err := emu.Stop(); err != nil {
		t.Fatal(err)
	}
	s := waitStatusFor(t, p, "node-2", 20*time.Second, func(s Status, ok bool) bool { return ok && s.Err != nil })
	if s.Reason != ReasonUnreachable || s.PoweredOff(time.Now()) {
		t.Errorf("node-2 with its BMC stopped: %+v, want reason %s and not off", s, ReasonUnreachable)
	}
}

func waitStatusFor(t *testing.T, p *Poller, machine string, d time.Duration, ok func(Status, bool) bool) Status {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		s, found := p.Status(machine)
		if ok(s, found) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("machine %s: status %+v (found %v) never became what the test waits for", machine, s, found)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

package frr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

// Where Debian's frr package installs the daemons.
const (
	Zebra = "/usr/lib/frr/zebra"
	BFDD  = "/usr/lib/frr/bfdd"
	BGPD  = "/usr/lib/frr/bgpd"
	VTYSH = "vtysh"
)

// daemons are the daemons Start starts, in order: bfdd and bgpd reach
// zebra, and bgpd asks bfdd (through zebra) for the sessions of its
// neighbours with "bfd".
var daemons = []string{Zebra, BFDD, BGPD}

// Available reports why FRR cannot run here (nil: it can).
func Available() error {
	for _, p := range daemons {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("FRR is not installed (apt-get install frr): %w", err)
		}
	}
	return nil
}

// Instance is FRR running in a lab host.
type Instance struct {
	Host *netlab.Host
	dir  string // the daemons' own: configuration, sockets, pid files, logs
	keep string // where Stop leaves the logs
	proc []*netlab.Process
}

// Start writes config (FRR's integrated configuration: "router bgp ...",
// "bfd ...") and starts zebra, bfdd and bgpd in h, with their sockets, pid
// files and logs in a directory of their own; it returns once each answers
// vtysh. Stop copies their logs into logDir.
//
// The daemons drop to user frr, which cannot enter a test's temporary
// directory (mode 0700): their directory is a fresh one under the
// system's temporary directory, frr's alone (privateDir), removed by Stop.
func Start(ctx context.Context, h *netlab.Host, logDir, config string) (*Instance, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	dir, err := privateDir(config)
	if err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "frr.conf")
	r := &Instance{Host: h, dir: dir, keep: logDir}
	for _, d := range daemons {
		name := filepath.Base(d)
		args := []string{"-z", filepath.Join(dir, "zserv.api"), "--vty_socket", dir,
			"-i", filepath.Join(dir, name+".pid"), "-f", conf,
			"--log", "file:" + filepath.Join(dir, name+".log")}
		if d == BFDD {
			args = append(args, "--bfdctl", filepath.Join(dir, "bfdd.sock"))
		}
		p, err := h.Start(context.Background(), filepath.Join(logDir, name+".out"), d, args...)
		if err != nil {
			_ = r.Stop()
			return nil, err
		}
		r.proc = append(r.proc, p)
		if err := r.waitVTY(ctx, name); err != nil {
			_ = r.Stop()
			return nil, err
		}
	}
	return r, nil
}

func (r *Instance) waitVTY(ctx context.Context, daemon string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := r.VTY(ctx, "show version")
		if _, serr := os.Stat(filepath.Join(r.dir, daemon+".vty")); err == nil && serr == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("FRR %s in %s does not answer vtysh: %v", daemon, r.Host.Name, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// VTY runs one vtysh command against the router and returns its output.
func (r *Instance) VTY(ctx context.Context, command string) ([]byte, error) {
	out, err := r.Host.Command(ctx, VTYSH, "--vty_socket", r.dir, "-c", command).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("vtysh -c %q: %w: %s", command, err, out)
	}
	return out, nil
}

// Configure changes the running router's configuration: lines are typed
// in vtysh's configuration mode, in order ("router bgp 64512", " neighbor
// LB bfd", "exit", ...).
func (r *Instance) Configure(ctx context.Context, lines ...string) error {
	args := []string{"--vty_socket", r.dir, "-c", "configure terminal"}
	for _, l := range lines {
		args = append(args, "-c", l)
	}
	out, err := r.Host.Command(ctx, VTYSH, args...).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		return fmt.Errorf("vtysh configure %q: %v: %s", lines, err, out)
	}
	return nil
}

// ShellCommand is the command line that runs one vtysh command against
// the router from the machine's shell, for a person to type while the
// router runs.
func (r *Instance) ShellCommand(command string) string {
	return fmt.Sprintf("ip netns exec %s %s --vty_socket %s -c '%s'", r.Host.Netns, VTYSH, r.dir, command)
}

// Nexthops returns the next hops of the route to prefix that the router
// installed in its kernel (FIB), sorted; none when it has no such route.
func (r *Instance) Nexthops(ctx context.Context, prefix netip.Prefix) ([]netip.Addr, error) {
	cmd := "show ip route " + prefix.String() + " json"
	if prefix.Addr().Is6() {
		cmd = "show ipv6 route " + prefix.String() + " json"
	}
	out, err := r.VTY(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return ParseNexthops(out, prefix)
}

// route is the part of FRR's "show ip route json" that Nexthops reads.
type route struct {
	Protocol  string `json:"protocol"`
	Selected  bool   `json:"selected"`
	Installed bool   `json:"installed"`
	Nexthops  []struct {
		IP  string `json:"ip"`
		FIB bool   `json:"fib"`
	} `json:"nexthops"`
}

// ParseNexthops reads the next hops installed in the kernel from the
// output of vtysh's "show ip route <prefix> json" (or "show ipv6 route"),
// sorted; none when it has no such route.
func ParseNexthops(out []byte, prefix netip.Prefix) ([]netip.Addr, error) {
	var routes map[string][]route
	if err := json.Unmarshal(out, &routes); err != nil {
		return nil, fmt.Errorf("FRR route JSON: %w", err)
	}
	var hops []netip.Addr
	for _, rt := range routes[prefix.String()] {
		if !rt.Selected || !rt.Installed {
			continue
		}
		for _, nh := range rt.Nexthops {
			if a, err := netip.ParseAddr(nh.IP); err == nil && nh.FIB {
				hops = append(hops, a)
			}
		}
	}
	slices.SortFunc(hops, netip.Addr.Compare)
	return slices.Compact(hops), nil
}

// Stop stops the daemons (bgpd first, zebra last, so that none talks to
// a zebra that is gone), keeps their logs and removes their
// directory. Safe to call more than once.
func (r *Instance) Stop() error {
	var errs []error
	for i := len(r.proc) - 1; i >= 0; i-- {
		if err := r.proc[i].Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	r.proc = nil
	if r.dir == "" {
		return errors.Join(errs...)
	}
	for _, d := range daemons {
		d := filepath.Base(d)
		errs = append(errs, copyLog(filepath.Join(r.dir, d+".log"), filepath.Join(r.keep, d+".log")))
	}
	errs = append(errs, os.RemoveAll(r.dir))
	r.dir = ""
	return errors.Join(errs...)
}

// Dir is the daemons' directory (configuration, sockets, pid files,
// logs), empty after Stop.
func (r *Instance) Dir() string { return r.dir }

// dirPrefix names the daemons' directories under the system's temporary
// directory.
const dirPrefix = "groundcloud-frr-"

// RemoveDir removes the directory of a router whose process died before
// it could Stop (its daemons gone too). It refuses any path that is not
// one Start makes.
func RemoveDir(dir string) error {
	if filepath.Dir(dir) != filepath.Clean(os.TempDir()) || !strings.HasPrefix(filepath.Base(dir), dirPrefix) {
		return fmt.Errorf("%s is not the directory of an FRR router", dir)
	}
	return os.RemoveAll(dir)
}

// Log returns the path of a daemon's log ("zebra", "bfdd", "bgpd"): in the
// daemons' directory while they run, in the log directory after Stop.
func (r *Instance) Log(daemon string) string {
	if r.dir == "" {
		return filepath.Join(r.keep, daemon+".log")
	}
	return filepath.Join(r.dir, daemon+".log")
}

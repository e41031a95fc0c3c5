package redfish

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/groundcloud/groundcloud/test/framework/controlplane"
	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

// Python is the interpreter the emulator runs with: Debian's, whose
// packages hold the libraries it imports (not one of a user's own).
const Python = "/usr/bin/python3"

// DefaultPort is where the emulator listens unless Options say otherwise.
const DefaultPort = 8000

// modules are what the vendored emulator imports beyond the standard
// library, with the Debian package that holds each.
var modules = [][2]string{
	{"flask", "python3-flask"},
	{"requests", "python3-requests"},
	{"tenacity", "python3-tenacity"},
	{"bcrypt", "python3-bcrypt"},
	{"webob", "python3-webob"},
}

// Available reports why the emulator cannot run here (nil: it can).
func Available() error {
	var missing []string
	for _, m := range modules {
		if err := exec.Command(Python, "-c", "import "+m[0]).Run(); err != nil {
			missing = append(missing, m[1])
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the Redfish emulator needs %v for %s (hack/install-deps.sh installs them)", missing, Python)
	}
	if _, err := sourceDir(); err != nil {
		return err
	}
	return nil
}

// sourceDir is the vendored copy of sushy-tools, for PYTHONPATH.
func sourceDir() (string, error) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "third_party", "sushy-tools")
	if _, err := os.Stat(filepath.Join(dir, "sushy_tools", "emulator", "main.py")); err != nil {
		return "", fmt.Errorf("the vendored Redfish emulator is missing: %w", err)
	}
	return dir, nil
}

// System is one emulated machine.
type System struct {
	// ID is the system's id in the service (/redfish/v1/Systems/<ID>); the
	// fake driver wants a UUID.
	ID string
	// Name is the system's name (a machine's name in the inventory).
	Name string
	// On is its power when the emulator starts.
	On bool
	// Model, SerialNumber and BIOSVersion, when set, are served as
	// Redfish Model, SerialNumber and BiosVersion (the vendored emulator's
	// patch, third_party/sushy-tools/README.md).
	Model, SerialNumber, BIOSVersion string
}

// Options configure an emulator.
type Options struct {
	// Systems are the machines it serves, at least one.
	Systems []System
	// Port is where it listens on the host's IPv4 address (0: DefaultPort).
	Port int
	// Username and Password, when Username is set, turn on HTTP basic
	// authentication (an htpasswd file with a bcrypt hash). The service
	// root answers without it, as upstream has it.
	Username, Password string
	// TLS serves HTTPS with a server certificate for the host's address,
	// signed by a certificate authority made for this emulator only
	// (Emulator.CAFile).
	TLS bool
}

// Emulator is sushy-tools' Redfish emulator running in a lab host.
type Emulator struct {
	Host *netlab.Host
	// URL is the service's base (scheme://address:port, no path).
	URL string
	// CAFile is the PEM file of the authority that signed the server
	// certificate (empty without TLS).
	CAFile string

	opts Options
	dir  string
	proc *netlab.Process
}

// Start writes the emulator's configuration into dir (which holds its
// state, certificates and log too; it must exist) and starts it in h; it
// returns once the service root answers. Stop stops it.
func Start(ctx context.Context, h *netlab.Host, dir string, opts Options) (*Emulator, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if len(opts.Systems) == 0 {
		return nil, errors.New("redfish emulator: no systems")
	}
	if opts.Port == 0 {
		opts.Port = DefaultPort
	}
	src, _ := sourceDir()
	e := &Emulator{Host: h, opts: opts, dir: dir}
	conf, err := e.writeFiles()
	if err != nil {
		return nil, fmt.Errorf("redfish emulator in %s: %w", h.Name, err)
	}
	cmd := h.Command(context.Background(), Python, "-m", "sushy_tools.emulator.main",
		"--config", conf, "-i", h.Addr4.String(), "-p", strconv.Itoa(opts.Port))
	cmd.Env = append(os.Environ(), "PYTHONPATH="+src, "PYTHONDONTWRITEBYTECODE=1")
	if e.proc, err = h.StartCmd(context.Background(), e.LogPath(), cmd); err != nil {
		return nil, err
	}
	if err := e.waitReady(ctx); err != nil {
		_ = e.Stop()
		return nil, err
	}
	return e, nil
}

func (e *Emulator) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := e.get(ctx, "/redfish/v1/", nil)
		if err == nil {
			return nil
		}
		select {
		case <-e.proc.Done():
			return fmt.Errorf("redfish emulator in %s exited (log %s): %v", e.Host.Name, e.LogPath(), e.proc.Err())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redfish emulator in %s does not answer (log %s): %w", e.Host.Name, e.LogPath(), err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Addr is where the service listens.
func (e *Emulator) Addr() netip.AddrPort {
	return netip.AddrPortFrom(e.Host.Addr4, uint16(e.opts.Port))
}

// SystemURL is the URL of a system's resource.
func (e *Emulator) SystemURL(id string) string {
	return e.URL + SystemPath(id)
}

// SystemPath is the @odata.id of a system's resource.
func SystemPath(id string) string {
	return "/redfish/v1/Systems/" + url.PathEscape(id)
}

// LogPath is the emulator's log (its stdout and stderr).
func (e *Emulator) LogPath() string { return filepath.Join(e.dir, "emulator.log") }

// Stop stops the emulator: nil when it ended on the SIGTERM that Stop
// sends, how it ended otherwise (it had crashed). Safe to call more than
// once.
func (e *Emulator) Stop() error {
	if e.proc == nil {
		return nil
	}
	err := e.proc.Stop()
	e.proc = nil
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM {
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("redfish emulator in %s (log %s): %w", e.Host.Name, e.LogPath(), err)
	}
	return nil
}

// client dials from the emulator's own host, trusting its authority.
func (e *Emulator) client() (*http.Client, error) {
	c := e.Host.HTTPClient()
	c.Timeout = 10 * time.Second
	if e.CAFile == "" {
		return c, nil
	}
	tc, err := tlsConfig(e.CAFile)
	if err != nil {
		return nil, err
	}
	c.Transport.(*http.Transport).TLSClientConfig = tc
	return c, nil
}

package membership

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// DefaultPort is the default gossip port (TCP and UDP). Not memberlist's
// 7946: MetalLB speakers and Serf use that one, and may run on the same
// hosts.
const DefaultPort = 7947

// Options are the command-line settings of membership.
type Options struct {
	// Address is host:port to bind and advertise; an empty host means the
	// first IPv4 address (else IPv6) of the client-facing interface that is
	// not a virtual IP.
	Address string
	// Seeds are gossip addresses (host or host:port) to join at start and
	// whenever they are not members.
	Seeds []string
	// KeyFile holds the shared gossip key: 16, 24 or 32 bytes (AES-128, -192,
	// -256), raw or base64-encoded.
	KeyFile string
	// ProbeInterval, ProbeTimeout and SuspicionMult tune failure detection
	// (memberlist's SWIM): a dead host is declared dead after about
	// ProbeInterval * (1 + SuspicionMult) plus the wait for its next probe.
	ProbeInterval, ProbeTimeout time.Duration
	SuspicionMult               int
	// HoldDown is how long a host that was unhealthy (or restarted) while
	// others served stays healthy before it takes its addresses back.
	HoldDown time.Duration
	// ConflictProbeInterval is how often each owned address is probed (ARP
	// for IPv4, a DAD Neighbor Solicitation for IPv6) to detect another host
	// answering for it.
	ConflictProbeInterval time.Duration
	// AddressProbes is how many probes a new address gets before this host
	// first holds it (0: none; see probe.go), AddressProbeSpacing the time
	// between them and after the last.
	AddressProbes       int
	AddressProbeSpacing time.Duration
}

// NewOptions returns the defaults: a dead host is detected in about a
// second.
func NewOptions() Options {
	return Options{
		Address:               ":" + strconv.Itoa(DefaultPort),
		ProbeInterval:         200 * time.Millisecond,
		ProbeTimeout:          100 * time.Millisecond,
		SuspicionMult:         2,
		HoldDown:              10 * time.Second,
		ConflictProbeInterval: time.Second,
		AddressProbes:         3,
		AddressProbeSpacing:   100 * time.Millisecond,
	}
}

// AddFlags adds the options' flags to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Address, "gossip-address", o.Address, "host:port this agent gossips on with the other agents (UDP and TCP); an empty host means the first address of --interface")
	fs.StringSliceVar(&o.Seeds, "gossip-seeds", o.Seeds, "gossip addresses (host or host:port) of other agents to join; agents also find each other in LoadBalancer status")
	fs.StringVar(&o.KeyFile, "gossip-key-file", o.KeyFile, "file holding the gossip encryption key shared by all agents: 16, 24 or 32 bytes, raw or base64 (required with --vip-ownership=memberlist)")
	fs.DurationVar(&o.ProbeInterval, "gossip-probe-interval", o.ProbeInterval, "time between two failure-detection probes of one agent by another")
	fs.DurationVar(&o.ProbeTimeout, "gossip-probe-timeout", o.ProbeTimeout, "time to wait for a probe's answer before asking others to probe")
	fs.IntVar(&o.SuspicionMult, "gossip-suspicion-multiplier", o.SuspicionMult, "probe intervals a suspected agent has to refute before it is declared dead")
	fs.DurationVar(&o.HoldDown, "ownership-hold-down", o.HoldDown, "how long an agent that was unhealthy or restarted stays healthy before it takes its share of addresses back")
	fs.DurationVar(&o.ConflictProbeInterval, "conflict-probe-interval", o.ConflictProbeInterval, "how often held addresses are probed (ARP for IPv4, Neighbor Discovery for IPv6) to detect another host answering for them")
	fs.IntVar(&o.AddressProbes, "address-probes", o.AddressProbes, "probes (ARP for IPv4, DAD Neighbor Solicitations for IPv6) a new address gets before it is first announced: a station that answers and is no load-balancer host means the address is in use, and it is not announced (0: no probes)")
	fs.DurationVar(&o.AddressProbeSpacing, "address-probe-spacing", o.AddressProbeSpacing, "time between the probes of a new address, and after the last before it is announced")
}

// Validate reports every problem with the values at once; it reads no file.
func (o Options) Validate() error {
	var errs []error
	if _, _, err := splitAddress(o.Address, DefaultPort); err != nil {
		errs = append(errs, fmt.Errorf("--gossip-address: %w", err))
	}
	for _, s := range o.Seeds {
		if host, _, err := splitAddress(s, DefaultPort); err != nil || host == "" {
			errs = append(errs, fmt.Errorf("--gossip-seeds %q: want host or host:port", s))
		}
	}
	if o.KeyFile == "" {
		errs = append(errs, errors.New("--gossip-key-file is required: gossip between agents is encrypted and authenticated with a shared key"))
	}
	if o.ProbeInterval <= 0 || o.ProbeTimeout <= 0 || o.ProbeTimeout >= o.ProbeInterval {
		errs = append(errs, fmt.Errorf("--gossip-probe-timeout (%s) must be > 0 and less than --gossip-probe-interval (%s)", o.ProbeTimeout, o.ProbeInterval))
	}
	if o.SuspicionMult < 1 {
		errs = append(errs, fmt.Errorf("--gossip-suspicion-multiplier %d must be at least 1", o.SuspicionMult))
	}
	if o.HoldDown < 0 {
		errs = append(errs, fmt.Errorf("--ownership-hold-down %s must not be negative", o.HoldDown))
	}
	errs = append(errs, o.ValidateSolo())
	return errors.Join(errs...)
}

// ValidateSolo reports the problems of the values a lone host
// (--vip-ownership=all) uses: the probe settings.
func (o Options) ValidateSolo() error {
	var errs []error
	if o.ConflictProbeInterval < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("--conflict-probe-interval %s must be at least 100ms", o.ConflictProbeInterval))
	}
	if o.AddressProbes < 0 || o.AddressProbes > 10 {
		errs = append(errs, fmt.Errorf("--address-probes %d must be 0 to 10", o.AddressProbes))
	}
	if o.AddressProbes > 0 && (o.AddressProbeSpacing < 10*time.Millisecond || o.AddressProbeSpacing > 2*time.Second) {
		errs = append(errs, fmt.Errorf("--address-probe-spacing %s must be 10ms to 2s", o.AddressProbeSpacing))
	}
	return errors.Join(errs...)
}

// SoloConfig is the Config of a lone host name with client-facing
// interface iface (Config.Solo). Call it after ValidateSolo.
func (o Options) SoloConfig(name, iface string) Config {
	return Config{
		Name: name, Interface: iface, Solo: true, HoldDown: o.HoldDown,
		ConflictProbeInterval: o.ConflictProbeInterval,
		AddressProbes:         o.AddressProbes, AddressProbeSpacing: o.AddressProbeSpacing,
	}
}

// Config reads the key file and returns the Config of host name with
// client-facing interface iface. Call it after Validate.
func (o Options) Config(name, iface string) (Config, error) {
	key, err := LoadKey(o.KeyFile)
	if err != nil {
		return Config{}, err
	}
	host, port, err := splitAddress(o.Address, DefaultPort)
	if err != nil {
		return Config{}, fmt.Errorf("--gossip-address: %w", err)
	}
	cfg := Config{
		Name: name, Interface: iface, BindHost: host, BindPort: port, Key: key,
		ProbeInterval: o.ProbeInterval, ProbeTimeout: o.ProbeTimeout, SuspicionMult: o.SuspicionMult,
		HoldDown: o.HoldDown, ConflictProbeInterval: o.ConflictProbeInterval,
		AddressProbes: o.AddressProbes, AddressProbeSpacing: o.AddressProbeSpacing,
	}
	for _, s := range o.Seeds {
		h, p, _ := splitAddress(s, port)
		cfg.Seeds = append(cfg.Seeds, net.JoinHostPort(h, strconv.Itoa(p)))
	}
	return cfg, nil
}

// LoadKey reads a gossip key: 16, 24 or 32 bytes, raw or base64-encoded
// (surrounding white space ignored), as a Secret mounted as a file gives it.
func LoadKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--gossip-key-file: %w", err)
	}
	text := strings.TrimSpace(string(b))
	if k, err := base64.StdEncoding.DecodeString(text); err == nil && validKeyLen(len(k)) {
		return k, nil
	}
	if validKeyLen(len(b)) {
		return b, nil
	}
	return nil, fmt.Errorf("--gossip-key-file %s: want 16, 24 or 32 bytes, raw or base64 (e.g. head -c 32 /dev/urandom | base64)", path)
}

func validKeyLen(n int) bool { return n == 16 || n == 24 || n == 32 }

// splitAddress splits "host:port", "host" or ":port"; an IPv6 host with a
// port is in brackets.
func splitAddress(s string, defaultPort int) (string, int, error) {
	s = strings.TrimSpace(s)
	host, portText, err := net.SplitHostPort(s)
	if err != nil {
		// No port: a bare host or IPv6 address.
		if a, perr := netip.ParseAddr(strings.Trim(s, "[]")); perr == nil {
			return a.String(), defaultPort, nil
		}
		if s == "" || strings.ContainsAny(s, ":[]") {
			return "", 0, fmt.Errorf("address %q: want host:port", s)
		}
		return s, defaultPort, nil
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("address %q: port must be 1-65535", s)
	}
	return host, port, nil
}

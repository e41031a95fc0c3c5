package netlab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Defaults for Options.
var (
	DefaultSubnet4 = netip.MustParsePrefix("192.0.2.0/24")
	DefaultSubnet6 = netip.MustParsePrefix("2001:db8:0:1::/64")
)

const (
	bridgeName = "br0"
	hostIface  = "eth0"
	switchName = "switch" // the switch namespace is "<prefix>-switch"
)

// Options configure a lab. The zero value is a lab with a fresh prefix
// (RunPrefix(DefaultFamily)) and the default subnets.
type Options struct {
	// Prefix starts every namespace name; lower-case letters and digits.
	// It must be unique among labs that exist at the same time.
	Prefix string
	// Subnet4 and Subnet6 are the subnets of the hosts' addresses.
	Subnet4, Subnet6 netip.Prefix
}

// Lab is a bridge in a namespace of its own and the hosts joined to it. Its
// exported fields are read-only. Its methods are safe for concurrent use.
type Lab struct {
	Prefix           string
	Subnet4, Subnet6 netip.Prefix
	// SwitchNetns names the namespace holding the bridge.
	SwitchNetns string
	// Gateway4 and Gateway6 are never given to a host: they are kept for
	// the link from the root namespace into the lab that the sandbox will
	// need (AddRouteFromHost, not implemented: it is the only operation
	// that would touch the root namespace).
	Gateway4, Gateway6 netip.Addr

	mu       sync.Mutex
	closed   bool
	switchNS netns.NsHandle
	hosts    []*Host
	ports    int // bridge ports ever made, for their names
	pool4    *addrPool
	pool6    *addrPool
	procs    map[*Process]bool
	spawner  *spawner // started by the first Start
}

// New creates the switch namespace and its bridge. ctx bounds the setup
// only. On error nothing is left behind.
func New(ctx context.Context, opts Options) (*Lab, error) {
	if opts.Prefix == "" {
		opts.Prefix = RunPrefix(DefaultFamily)
	}
	if !opts.Subnet4.IsValid() {
		opts.Subnet4 = DefaultSubnet4
	}
	if !opts.Subnet6.IsValid() {
		opts.Subnet6 = DefaultSubnet6
	}
	var errs []error
	if !prefixRE.MatchString(opts.Prefix) {
		errs = append(errs, fmt.Errorf("prefix %q: want 1-32 lower-case letters and digits", opts.Prefix))
	}
	errs = append(errs, checkSubnet("subnet4", opts.Subnet4, true), checkSubnet("subnet6", opts.Subnet6, false))
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("new lab: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("new lab: %w", err)
	}
	l := &Lab{
		Prefix:      opts.Prefix,
		Subnet4:     opts.Subnet4,
		Subnet6:     opts.Subnet6,
		SwitchNetns: opts.Prefix + "-" + switchName,
		pool4:       newAddrPool(opts.Subnet4),
		pool6:       newAddrPool(opts.Subnet6),
		procs:       map[*Process]bool{},
	}
	l.Gateway4, l.Gateway6 = l.pool4.gateway(), l.pool6.gateway()
	ns, err := createNamespace(l.SwitchNetns)
	if err != nil {
		return nil, fmt.Errorf("new lab: %w", err)
	}
	l.switchNS = ns
	if err := l.setupSwitch(); err != nil {
		return nil, errors.Join(fmt.Errorf("new lab %s: %w", l.Prefix, err), l.Close())
	}
	return l, nil
}

// setupSwitch creates the bridge. IPv6 is off in the switch namespace so
// that the bridge and its ports send nothing of their own (no DAD, MLD or
// router solicitations); bridging is unaffected.
func (l *Lab) setupSwitch() error {
	for _, key := range []string{"net.ipv6.conf.all.disable_ipv6", "net.ipv6.conf.default.disable_ipv6"} {
		if err := writeSysctl(l.switchNS, key, "1"); err != nil {
			return err
		}
	}
	nl, err := netlinkIn(l.switchNS)
	if err != nil {
		return fmt.Errorf("netlink in %s: %w", l.SwitchNetns, err)
	}
	defer nl.Close()
	snooping := false
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: bridgeName}, MulticastSnooping: &snooping}
	if err := nl.LinkAdd(br); err != nil {
		return fmt.Errorf("add bridge: %w", err)
	}
	if err := nl.LinkSetUp(br); err != nil {
		return fmt.Errorf("set bridge up: %w", err)
	}
	return nil
}

// Host returns the host with the given name, or nil.
func (l *Lab) Host(name string) *Host {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, h := range l.hosts {
		if h.Name == name {
			return h
		}
	}
	return nil
}

// Hosts returns the hosts in the order they were added.
func (l *Lab) Hosts() []*Host {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.hosts)
}

// Close stops every process started through the lab (SIGTERM to its process
// group, SIGKILL after StopGrace), then deletes every namespace of the lab.
// It is idempotent; the lab cannot be used afterwards.
func (l *Lab) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	procs := make([]*Process, 0, len(l.procs))
	for p := range l.procs {
		procs = append(procs, p)
	}
	hosts := l.hosts
	l.mu.Unlock()

	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(func() { _ = p.Stop() }) // how they exited is for their owners to check
	}
	wg.Wait()
	if l.spawner != nil {
		l.spawner.close()
	}
	var errs []error
	for _, h := range hosts {
		h.ns.Close()
		errs = append(errs, removeNamespace(h.Netns))
	}
	if l.switchNS.IsOpen() {
		l.switchNS.Close()
	}
	errs = append(errs, removeNamespace(l.SwitchNetns))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close lab %s: %w", l.Prefix, err)
	}
	return nil
}

var errClosed = errors.New("lab closed")

package layer2

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/vishvananda/netns"
	"k8s.io/klog/v2"
)

// Manager holds virtual IPs on one interface. Its methods are safe for
// concurrent use; they run one at a time.
type Manager struct {
	iface  string
	logger klog.Logger
	ns     netns.NsHandle // of iface; closed means the caller's namespace

	burstCount    int
	burstInterval time.Duration
	openSender    func(ns netns.NsHandle, ifindex int) (sender, error)

	ops   sync.Mutex          // serialises Set, Announce and Cleanup
	added map[netip.Addr]bool // what this Manager added and still holds; guarded by ops

	mu         sync.Mutex // guards below; bursts take it for each frame
	held       map[netip.Addr]bool
	quiet      map[netip.Addr]bool // held but never announced (Quiet)
	burstCtx   context.Context
	stopBursts context.CancelFunc
	bursts     sync.WaitGroup
}

// Option configures a Manager.
type Option func(*Manager)

// InNamespace makes the Manager work on the interface of that network
// namespace instead of the caller's. The Manager does not close ns.
func InNamespace(ns netns.NsHandle) Option { return func(m *Manager) { m.ns = ns } }

// NewManager returns a Manager of iface; it touches nothing until Set.
func NewManager(iface string, logger klog.Logger, opts ...Option) *Manager {
	m := &Manager{
		iface:         iface,
		logger:        logger.WithValues("interface", iface),
		ns:            netns.None(),
		burstCount:    defaultBurstCount,
		burstInterval: defaultBurstInterval,
		openSender:    openPacketSender,
		added:         map[netip.Addr]bool{},
		held:          map[netip.Addr]bool{},
		quiet:         map[netip.Addr]bool{},
	}
	for _, o := range opts {
		o(m)
	}
	return m
}

// Set makes the interface hold exactly want among the addresses the Manager
// owns: it removes owned addresses no longer wanted, adds the missing ones
// (IPv4 /32, IPv6 /128 with IFA_F_NODAD) and announces each added address in
// a burst off the caller's goroutine. A wanted address already present
// without the Manager's mark is held as it is and never removed. Invalid
// addresses in want are reported in the error and the rest applied, as are
// the changes that succeed when others fail.
func (m *Manager) Set(ctx context.Context, want []netip.Addr) error {
	m.ops.Lock()
	defer m.ops.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	want, wantErr := normalize(want)
	r, l, observed, err := m.observe()
	if err != nil {
		return errors.Join(wantErr, err)
	}
	defer r.close()

	c := plan(want, observed, m.ours)
	m.setHeld(want) // first, so bursts stop before an address goes
	errs := []error{wantErr}
	for _, p := range c.remove {
		if err := r.delAddr(l.index, p); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(m.added, p.Addr())
	}
	var added []netip.Addr
	for _, a := range c.add {
		if err := r.addAddr(l.index, a); err != nil {
			errs = append(errs, err)
			m.unhold(a)
			continue
		}
		m.added[a] = true
		added = append(added, a)
	}
	m.logChanges(c, added)
	m.announce(l, added)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("set virtual IPs on %s: %w", m.iface, err)
	}
	return nil
}

// Announce re-announces every held address - wanted by the last Set and
// present on the interface - in a burst off the caller's goroutine. Errors
// are logged.
func (m *Manager) Announce(ctx context.Context) {
	m.ops.Lock()
	defer m.ops.Unlock()
	if ctx.Err() != nil {
		return
	}
	r, l, observed, err := m.observe()
	if err != nil {
		m.logger.Error(err, "Cannot re-announce virtual IPs")
		return
	}
	r.close()
	present := map[netip.Addr]bool{}
	for _, o := range observed {
		present[o.Prefix.Addr()] = true
	}
	var addrs []netip.Addr
	m.mu.Lock()
	for a := range m.held {
		if present[a] && !m.quiet[a] {
			addrs = append(addrs, a)
		}
	}
	m.mu.Unlock()
	m.announce(l, addrs)
}

// Quiet makes the Manager stop announcing addrs, from the next frame of a
// burst in flight on, and clears what an earlier call marked: Set keeps
// holding them as it holds any wanted address, but neither Set, Announce
// nor a burst announces them. It is for addresses being handed over to
// another host: kept on the interface so that what clients still send here
// is forwarded, while clients learn the other host's MAC and must not be
// drawn back just before this host removes them.
func (m *Manager) Quiet(addrs []netip.Addr) {
	want := map[netip.Addr]bool{}
	for _, a := range addrs {
		if a.IsValid() {
			want[a.Unmap()] = true
		}
	}
	m.mu.Lock()
	changed := !maps.Equal(want, m.quiet)
	m.quiet = want
	m.mu.Unlock()
	if changed && len(want) > 0 {
		m.logger.Info("Handing virtual IPs over: held without announcing them until they are removed", "addresses", slices.SortedFunc(maps.Keys(want), netip.Addr.Compare))
	}
}

// Present returns the addresses on the interface that the Manager owns,
// whether this Manager or a predecessor added them: what an agent that
// stopped for a restart left in place, for the next one to adopt. An
// interface that no longer exists holds none.
func (m *Manager) Present(context.Context) ([]netip.Addr, error) {
	m.ops.Lock()
	defer m.ops.Unlock()
	r, _, observed, err := m.observe()
	if errors.Is(err, errNoLink) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list virtual IPs: %w", err)
	}
	r.close()
	var out []netip.Addr
	for _, o := range observed {
		if m.ours(o) {
			out = append(out, o.Prefix.Addr())
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out, nil
}

// Cleanup stops announcing and removes every address the Manager owns on
// the interface, whether this Manager or a predecessor added it. An
// interface that no longer exists has nothing to clean. It runs to the end
// even when ctx has ended: it is what a shutdown calls last.
func (m *Manager) Cleanup(context.Context) error {
	m.ops.Lock()
	defer m.ops.Unlock()
	m.setHeld(nil)
	m.mu.Lock()
	if m.stopBursts != nil {
		m.stopBursts()
		m.burstCtx, m.stopBursts = nil, nil
	}
	m.mu.Unlock()
	m.bursts.Wait()

	r, l, observed, err := m.observe()
	if errors.Is(err, errNoLink) {
		clear(m.added)
		return nil
	}
	if err != nil {
		return fmt.Errorf("clean up virtual IPs: %w", err)
	}
	defer r.close()
	var errs []error
	var removed []netip.Prefix
	for _, o := range observed {
		if !m.ours(o) {
			continue
		}
		if err := r.delAddr(l.index, o.Prefix); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(m.added, o.Prefix.Addr())
		removed = append(removed, o.Prefix)
	}
	if len(removed) > 0 {
		m.logger.Info("Removed virtual IPs", "addresses", removed)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("clean up virtual IPs on %s: %w", m.iface, err)
	}
	return nil
}

// observe opens netlink, finds the interface and lists its addresses. It
// also drops from the record what is no longer there. The caller closes r.
func (m *Manager) observe() (*rtnl, link, []kernelAddr, error) {
	r, err := dialRTNL(m.ns)
	if err != nil {
		return nil, link{}, nil, err
	}
	l, err := r.link(m.iface)
	if err != nil {
		r.close()
		return nil, link{}, nil, err
	}
	observed, err := r.addrs(l.index)
	if err != nil {
		r.close()
		return nil, link{}, nil, fmt.Errorf("interface %s: %w", m.iface, err)
	}
	present := map[netip.Addr]bool{}
	for _, o := range observed {
		present[o.Prefix.Addr()] = true
	}
	for a := range m.added {
		if !present[a] {
			delete(m.added, a)
		}
	}
	return r, l, observed, nil
}

// ours tells whether the Manager owns an observed address: marked by the
// kernel, or added by this Manager (kernels before 5.18 drop the mark).
func (m *Manager) ours(o kernelAddr) bool {
	return o.Proto == AddrProtocol || m.added[o.Prefix.Addr()] && o.Prefix.IsSingleIP()
}

func (m *Manager) setHeld(want []netip.Addr) {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.held)
	for _, a := range want {
		m.held[a] = true
	}
}

func (m *Manager) unhold(a netip.Addr) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.held, a)
}

func (m *Manager) logChanges(c changes, added []netip.Addr) {
	if len(c.remove) > 0 {
		m.logger.Info("Removed virtual IPs", "addresses", c.remove)
	}
	if len(added) > 0 {
		m.logger.Info("Added virtual IPs", "addresses", added)
	}
	if len(c.foreign) > 0 {
		m.logger.V(2).Info("Wanted virtual IPs already present without our mark; holding them as they are", "addresses", c.foreign)
	}
}

package dataplane

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

// ctBackground is how many unrelated entries fill the table in the tests
// below: enough that a copy of the table in user space shows in the
// allocations (a few hundred bytes per entry), few enough to create fast.
const ctBackground = 50_000

// ctEntry is one conntrack entry as the tests create and read it.
type ctEntry struct {
	proto      uint8
	orig, repl netip.AddrPort // original source and destination
	from, to   netip.AddrPort // reply source and destination
}

func (e ctEntry) String() string {
	return fmt.Sprintf("%d %s>%s | %s>%s", e.proto, e.orig, e.repl, e.from, e.to)
}

// ctFlow builds an entry forwarded as the data plane does: client to VIP,
// DNATed to backend:nodePort and SNATed to the VIP.
func ctFlow(proto uint8, client netip.AddrPort, vip netip.AddrPort, backend netip.AddrPort) ctEntry {
	return ctEntry{proto: proto, orig: client, repl: vip, from: backend, to: netip.AddrPortFrom(vip.Addr(), client.Port())}
}

func createEntries(h *netlink.Handle, entries []ctEntry) error {
	for _, e := range entries {
		fam := netlink.InetFamily(unix.AF_INET)
		if e.orig.Addr().Is6() {
			fam = unix.AF_INET6
		}
		f := &netlink.ConntrackFlow{
			FamilyType: uint8(fam),
			Forward: netlink.IPTuple{Protocol: e.proto, SrcIP: net.IP(e.orig.Addr().AsSlice()), DstIP: net.IP(e.repl.Addr().AsSlice()),
				SrcPort: e.orig.Port(), DstPort: e.repl.Port()},
			Reverse: netlink.IPTuple{Protocol: e.proto, SrcIP: net.IP(e.from.Addr().AsSlice()), DstIP: net.IP(e.to.Addr().AsSlice()),
				SrcPort: e.from.Port(), DstPort: e.to.Port()},
			TimeOut: 3600,
		}
		if e.proto == unix.IPPROTO_TCP {
			f.ProtoInfo = &netlink.ProtoInfoTCP{State: nl.TCP_CONNTRACK_ESTABLISHED}
		}
		if err := h.ConntrackCreate(netlink.ConntrackTable, fam, f); err != nil {
			return fmt.Errorf("create %s: %w", e, err)
		}
	}
	return nil
}

// backgroundEntries are n UDP and TCP entries to addresses no test deletes.
func backgroundEntries(n int) []ctEntry {
	out := make([]ctEntry, 0, n)
	for i := range n {
		client := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), uint16(1024+i%60000))
		proto := uint8(unix.IPPROTO_UDP)
		if i%2 == 1 {
			proto = unix.IPPROTO_TCP
		}
		// Not NATed: the reply goes back to the client, so that every tuple
		// is unique.
		out = append(out, ctEntry{proto: proto, orig: client, repl: netip.MustParseAddrPort("198.51.100.7:443"),
			from: netip.MustParseAddrPort("198.51.100.7:443"), to: client})
	}
	return out
}

// listEntries reads the table of the calling thread's namespace.
func listEntries(h *netlink.Handle) (map[ctEntry]bool, error) {
	out := map[ctEntry]bool{}
	for _, fam := range []netlink.InetFamily{unix.AF_INET, unix.AF_INET6} {
		flows, err := h.ConntrackTableList(netlink.ConntrackTable, fam)
		if err != nil {
			return nil, err
		}
		for _, f := range flows {
			ap := func(ip net.IP, port uint16) netip.AddrPort {
				a, _ := netip.AddrFromSlice(ip)
				return netip.AddrPortFrom(a.Unmap(), port)
			}
			out[ctEntry{
				proto: f.Forward.Protocol,
				orig:  ap(f.Forward.SrcIP, f.Forward.SrcPort), repl: ap(f.Forward.DstIP, f.Forward.DstPort),
				from: ap(f.Reverse.SrcIP, f.Reverse.SrcPort), to: ap(f.Reverse.DstIP, f.Reverse.DstPort),
			}] = true
		}
	}
	return out, nil
}

// ctLab is a namespace whose conntrack table holds the background entries
// and the entries of the test.
type ctLab struct {
	t    *testing.T
	host *netlab.Host
}

func newCTLab(t *testing.T) *ctLab { return newCTLabN(t, ctBackground) }

func newCTLabN(t *testing.T, background int) *ctLab {
	l := netlab.NewT(t, netlab.Options{}) // skips with -short or without root
	c := &ctLab{t: t, host: l.AddHostT(t, "ct", netlab.HostOptions{})}
	c.create(backgroundEntries(background))
	return c
}

func (c *ctLab) do(fn func(h *netlink.Handle) error) {
	c.t.Helper()
	if err := c.host.Do(func() error {
		h, err := netlink.NewHandle(unix.NETLINK_NETFILTER)
		if err != nil {
			return err
		}
		defer h.Close()
		return fn(h)
	}); err != nil {
		c.t.Fatal(err)
	}
}

func (c *ctLab) create(entries []ctEntry) {
	c.t.Helper()
	c.do(func(h *netlink.Handle) error { return createEntries(h, entries) })
}

func (c *ctLab) list() map[ctEntry]bool {
	c.t.Helper()
	var out map[ctEntry]bool
	c.do(func(h *netlink.Handle) (err error) {
		out, err = listEntries(h)
		return err
	})
	return out
}

// allocated runs fn in the lab's namespace and returns the bytes the
// process allocated meanwhile.
func (c *ctLab) allocated(fn func() error) uint64 {
	c.t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := c.host.Do(fn); err != nil {
		c.t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// check fails the test unless exactly gone of the entries before are
// missing now.
func (c *ctLab) check(before map[ctEntry]bool, gone []ctEntry) {
	c.t.Helper()
	after := c.list()
	want := map[ctEntry]bool{}
	for _, e := range gone {
		want[e] = true
		if !before[e] {
			c.t.Fatalf("entry %s was not created", e)
		}
	}
	for e := range before {
		if want[e] && after[e] {
			c.t.Errorf("entry %s is still there", e)
		}
		if !want[e] && !after[e] {
			c.t.Errorf("entry %s was deleted", e)
		}
	}
}

// maxAllocated is far below what one copy of the background entries in
// user space takes (a dump message alone is over 100 bytes an entry).
const maxAllocated = ctBackground * 16

var (
	ctClient  = netip.MustParseAddr("192.0.2.2")
	ctClient6 = netip.MustParseAddr("2001:db8::2")
	ctVIP     = netip.MustParseAddr("192.0.2.100")
	ctVIP6    = netip.MustParseAddr("2001:db8::100")
	ctNodeA   = netip.MustParseAddr("192.0.2.11")
	ctNodeB   = netip.MustParseAddr("192.0.2.12")
	ctNodeA6  = netip.MustParseAddr("2001:db8::11")
	ctNodeB6  = netip.MustParseAddr("2001:db8::12")
	ctOther6  = netip.MustParseAddr("2001:db8::200")
)

func TestKernelConntrackDeleteUDPFlows(t *testing.T) {
	c := newCTLab(t)
	dns, dns6 := netip.AddrPortFrom(ctVIP, 53), netip.AddrPortFrom(ctVIP6, 53)
	toB, toA, toB6 := netip.AddrPortFrom(ctNodeB, 30053), netip.AddrPortFrom(ctNodeA, 30053), netip.AddrPortFrom(ctNodeB6, 30053)
	var gone, kept []ctEntry
	for p := range uint16(5) {
		gone = append(gone,
			ctFlow(unix.IPPROTO_UDP, netip.AddrPortFrom(ctClient, 40000+p), dns, toB),
			ctFlow(unix.IPPROTO_UDP, netip.AddrPortFrom(ctClient6, 40000+p), dns6, toB6))
		kept = append(kept,
			ctFlow(unix.IPPROTO_UDP, netip.AddrPortFrom(ctClient, 41000+p), dns, toA),                                // other backend
			ctFlow(unix.IPPROTO_TCP, netip.AddrPortFrom(ctClient, 42000+p), netip.AddrPortFrom(ctVIP, 53), toB),      // TCP drains
			ctFlow(unix.IPPROTO_UDP, netip.AddrPortFrom(ctClient, 43000+p), netip.AddrPortFrom(ctVIP, 54), toB),      // other port
			ctFlow(unix.IPPROTO_UDP, netip.AddrPortFrom(ctClient, 44000+p), dns, netip.AddrPortFrom(ctNodeB, 30054)), // other node port
			ctFlow(unix.IPPROTO_UDP, netip.AddrPortFrom(ctClient6, 41000+p), dns6, netip.AddrPortFrom(ctNodeA6, 30053)),
			ctFlow(unix.IPPROTO_UDP, netip.AddrPortFrom(ctClient6, 42000+p), netip.AddrPortFrom(ctOther6, 53), toB6),
		)
	}
	c.create(append(gone, kept...))
	before := c.list()
	flows := []Flow{
		{VIP: ctVIP, Port: 53, Backend: ctNodeB, NodePort: 30053},
		{VIP: ctVIP6, Port: 53, Backend: ctNodeB6, NodePort: 30053},
	}
	n := c.allocated(func() error { return NetlinkConntrack{}.DeleteUDPFlows(context.Background(), flows) })
	t.Logf("DeleteUDPFlows with %d entries in the table allocated %d bytes", len(before), n)
	if n > maxAllocated {
		t.Errorf("DeleteUDPFlows allocated %d bytes with %d entries in the table: it copies the table into user space (want at most %d)", n, len(before), maxAllocated)
	}
	c.check(before, gone)
}

func TestKernelConntrackDeleteFlowsTo(t *testing.T) {
	c := newCTLab(t)
	var gone, kept []ctEntry
	for p := range uint16(5) {
		gone = append(gone,
			ctFlow(unix.IPPROTO_TCP, netip.AddrPortFrom(ctClient, 40000+p), netip.AddrPortFrom(ctVIP, 80), netip.AddrPortFrom(ctNodeA, 30080)),
			ctFlow(unix.IPPROTO_UDP, netip.AddrPortFrom(ctClient, 40000+p), netip.AddrPortFrom(ctVIP, 53), netip.AddrPortFrom(ctNodeB, 30053)))
		gone = append(gone,
			ctFlow(unix.IPPROTO_TCP, netip.AddrPortFrom(ctClient6, 40000+p), netip.AddrPortFrom(ctVIP6, 80), netip.AddrPortFrom(ctNodeB6, 30080)))
		kept = append(kept,
			ctFlow(unix.IPPROTO_TCP, netip.AddrPortFrom(ctClient6, 41000+p), netip.AddrPortFrom(ctOther6, 80), netip.AddrPortFrom(ctNodeB6, 30080)),
			ctFlow(unix.IPPROTO_TCP, netip.AddrPortFrom(ctClient, 41000+p), netip.AddrPortFrom(ctNodeA, 80), netip.AddrPortFrom(ctNodeA, 80)))
	}
	c.create(append(gone, kept...))
	before := c.list()
	n := c.allocated(func() error {
		return NetlinkConntrack{}.DeleteFlowsTo(context.Background(), []netip.Addr{ctVIP, ctVIP6})
	})
	t.Logf("DeleteFlowsTo with %d entries in the table allocated %d bytes", len(before), n)
	if n > maxAllocated {
		t.Errorf("DeleteFlowsTo allocated %d bytes with %d entries in the table: it copies the table into user space (want at most %d)", n, len(before), maxAllocated)
	}
	c.check(before, gone)
}

// The kernel sends only the candidates a filter selects: for IPv4 the
// matching entries, for IPv6 those with the filter's protocol and ports.
func TestKernelConntrackFilteredDump(t *testing.T) {
	c := newCTLab(t)
	type family struct {
		vip, client, nodeA, nodeB, other netip.Addr
		gone                             []ctEntry
	}
	families := []*family{
		{vip: ctVIP, client: ctClient, nodeA: ctNodeA, nodeB: ctNodeB, other: netip.MustParseAddr("192.0.2.200")},
		{vip: ctVIP6, client: ctClient6, nodeA: ctNodeA6, nodeB: ctNodeB6, other: ctOther6},
	}
	var all []ctEntry
	for _, f := range families {
		dns := netip.AddrPortFrom(f.vip, 53)
		for p := range uint16(5) {
			f.gone = append(f.gone, ctFlow(unix.IPPROTO_UDP, netip.AddrPortFrom(f.client, 40000+p), dns, netip.AddrPortFrom(f.nodeB, 30053)))
			all = append(all,
				ctFlow(unix.IPPROTO_UDP, netip.AddrPortFrom(f.client, 41000+p), dns, netip.AddrPortFrom(f.nodeA, 30053)),
				ctFlow(unix.IPPROTO_UDP, netip.AddrPortFrom(f.client, 42000+p), dns, netip.AddrPortFrom(f.nodeB, 30054)),
				ctFlow(unix.IPPROTO_UDP, netip.AddrPortFrom(f.client, 43000+p), netip.AddrPortFrom(f.other, 53), netip.AddrPortFrom(f.nodeB, 30053)))
		}
		all = append(all, f.gone...)
	}
	c.create(all)
	for _, f := range families {
		before := c.list()
		filter := ctFilter{
			Orig:  ctTuple{Dst: f.vip, Proto: unix.IPPROTO_UDP, DstPort: 53},
			Reply: ctTuple{Src: f.nodeB, Proto: unix.IPPROTO_UDP, SrcPort: 30053},
		}
		read := -1
		if err := c.host.Do(func() error {
			conn, err := dialConntrack()
			if err != nil {
				return err
			}
			defer conn.close()
			fam := uint8(unix.AF_INET)
			if f.vip.Is6() {
				fam = unix.AF_INET6
			}
			read, err = conn.deleteMatching(fam, []ctFilter{filter})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		// IPv6: the kernel matches protocol and ports, not addresses: it
		// also sends the flows to node-a and to the other address.
		want := len(f.gone)
		if f.vip.Is6() {
			want += 10
		}
		if read != want {
			t.Errorf("%s: the kernel sent %d entries for a filter that matches %d of %d (want %d sent)", f.vip, read, len(f.gone), len(before), want)
		}
		c.check(before, f.gone)
	}
}

// More addresses than maxWalks take one walk of the table, which sends
// every entry of the family; only the addresses' entries go.
func TestKernelConntrackDeleteFlowsToManyAddresses(t *testing.T) {
	c := newCTLabN(t, 1000)
	var vips []netip.Addr
	var gone, kept []ctEntry
	for i := range maxWalks + 4 {
		vip := netip.AddrFrom4([4]byte{192, 0, 2, byte(100 + i)})
		vips = append(vips, vip)
		gone = append(gone, ctFlow(unix.IPPROTO_TCP, netip.AddrPortFrom(ctClient, uint16(40000+i)), netip.AddrPortFrom(vip, 80), netip.AddrPortFrom(ctNodeA, 30080)))
		kept = append(kept, ctFlow(unix.IPPROTO_TCP, netip.AddrPortFrom(ctClient, uint16(41000+i)), netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(200 + i)}), 80), netip.AddrPortFrom(ctNodeA, 30080)))
	}
	c.create(append(gone, kept...))
	before := c.list()
	if err := c.host.Do(func() error { return NetlinkConntrack{}.DeleteFlowsTo(context.Background(), vips) }); err != nil {
		t.Fatal(err)
	}
	c.check(before, gone)
}

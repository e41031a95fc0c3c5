package bfd

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"

	"github.com/groundcloud/groundcloud/test/framework/frr"
	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

// fast are the timers of the test's sessions: 100 ms, times 3.
var fast = Settings{DesiredMinTx: 100 * time.Millisecond, RequiredMinRx: 100 * time.Millisecond, DetectMult: 3}

// changes records the state changes a Runner reports.
type changes struct {
	mu  sync.Mutex
	all []string
}

func (c *changes) add(p Peer, ch Change) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.all = append(c.all, fmt.Sprintf("%s:%s>%s(%s)", p.Name, ch.From, ch.To, ch.Diag))
}

func (c *changes) get() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.all...)
}

// bfdLab is a load-balancer host running a Runner with sessions over IPv4
// and IPv6 to a router running FRR's bfdd, and a third host on the link.
type bfdLab struct {
	lb, router, other *netlab.Host
	frr               *frr.Instance
	runner            *Runner
	changes           *changes
	stop              context.CancelFunc
	done              chan struct{}
}

func startBFDLab(t *testing.T) *bfdLab {
	t.Helper()
	if err := frr.Available(); err != nil {
		t.Fatal(err)
	}
	RegisterMetrics()
	l := netlab.NewT(t, netlab.Options{})
	b := &bfdLab{
		lb: l.AddHostT(t, "lb", netlab.HostOptions{}), router: l.AddHostT(t, "router", netlab.HostOptions{}),
		other: l.AddHostT(t, "other", netlab.HostOptions{}), changes: &changes{},
	}
	conf := "frr defaults datacenter\nhostname router\n!\nbfd\n"
	for _, pair := range [][2]netip.Addr{{b.lb.Addr4, b.router.Addr4}, {b.lb.Addr6, b.router.Addr6}} {
		conf += fmt.Sprintf(" peer %s local-address %s\n  transmit-interval 100\n  receive-interval 100\n  detect-multiplier 3\n !\n", pair[0], pair[1])
	}
	r, err := frr.Start(t.Context(), b.router, t.TempDir(), conf+"!\n")
	if err != nil {
		t.Fatal(err)
	}
	b.frr = r
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("bfdd's log: %s", r.Log("bfdd"))
		}
		_ = r.Stop()
	})
	peers := []Peer{
		{Name: "router", Remote: b.router.Addr4, Settings: fast},
		{Name: "router6", Remote: b.router.Addr6, Local: b.lb.Addr6, Settings: fast},
	}
	must(t, b.lb.Do(func() error {
		var err error
		b.runner, err = Listen(Config{Peers: peers, Changed: b.changes.add})
		return err
	}))
	ctx, cancel := context.WithCancel(context.Background())
	b.stop, b.done = cancel, make(chan struct{})
	go func() {
		defer close(b.done)
		b.runner.Run(ctx)
	}()
	t.Cleanup(b.halt)
	return b
}

// halt stops the Runner and waits for it.
func (b *bfdLab) halt() {
	b.stop()
	<-b.done
}

// waitFor waits up to 10 s until both of the Runner's sessions are in
// state ours and both of bfdd's in status theirs.
func (b *bfdLab) waitFor(t *testing.T, ours State, theirs string) map[netip.Addr]frr.BFDPeer {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		peers, err := b.frr.BFDPeers(t.Context())
		if err == nil && b.runner.State("router") == ours && b.runner.State("router6") == ours &&
			peers[b.lb.Addr4].Status == theirs && peers[b.lb.Addr6].Status == theirs {
			return peers
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10s: ours %s and %s (want %s), bfdd's %+v (want %s; err %v); changes %v",
				b.runner.State("router"), b.runner.State("router6"), ours, peers, theirs, err, b.changes.get())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The Runner's sessions come Up with FRR's bfdd over IPv4 and IPv6, and
// bfdd uses the timers they ask for.
func TestSessionsWithFRR(t *testing.T) {
	b := startBFDLab(t)
	peers := b.waitFor(t, Up, "up")
	out, err := b.frr.VTY(t.Context(), "show bfd peer "+b.lb.Addr4.String()+" json")
	must(t, err)
	t.Logf("bfdd: %s", out)
	for _, want := range []string{`"remote-receive-interval":100`, `"remote-transmit-interval":100`, `"remote-detect-multiplier":3`} {
		if !containsCompact(out, want) {
			t.Errorf("bfdd does not see the agent's timers: no %s in %s", want, out)
		}
	}
	if p := peers[b.lb.Addr4]; p.RemoteID != b.runner.byRemote[b.router.Addr4].s.LocalDiscr() {
		t.Errorf("bfdd knows discriminator %d, the session's is %d", p.RemoteID, b.runner.byRemote[b.router.Addr4].s.LocalDiscr())
	}
}

// Packets that are not the session's do not flap it, on either side:
// wrong discriminators and a zero one from the router's own address and
// from another host on the link, packets not sent with TTL 255, and
// garbage, 1,000 of each as fast as they go.
func TestFloodDoesNotFlap(t *testing.T) {
	b := startBFDLab(t)
	before := b.waitFor(t, Up, "up")
	changesBefore := len(b.changes.get())
	// From the router's address and from another host, to the agent; from
	// another host to the router.
	sent := 0
	for _, f := range []struct {
		from *netlab.Host
		to   *netlab.Host
		ttl  int
	}{{b.router, b.lb, 255}, {b.other, b.lb, 255}, {b.other, b.router, 255}, {b.other, b.lb, 64}} {
		for _, v6 := range []bool{false, true} {
			sent += flood(t, f.from, f.to, v6, f.ttl, 1000)
		}
	}
	time.Sleep(time.Second) // several detection times
	after := b.waitFor(t, Up, "up")
	if got := b.changes.get(); len(got) != changesBefore {
		t.Errorf("the agent's sessions changed under the flood: %v", got[changesBefore:])
	}
	for _, a := range []netip.Addr{b.lb.Addr4, b.lb.Addr6} {
		if after[a].SessionDown != before[a].SessionDown {
			t.Errorf("bfdd's session with %s went down under the flood: %+v", a, after[a])
		}
	}
	d := b.runner.Discarded()
	t.Logf("sent %d packets; the agent discarded %v", sent, d)
	// The kernel may drop some of a burst before the agent reads it;
	// each kind must have arrived and been discarded for its reason.
	for _, reason := range []string{discardTTL, discardInvalid, discardUnknown, discardZero} {
		if d[reason] == 0 {
			t.Errorf("discarded %v: none for %s", d, reason)
		}
	}
}

// A pulled cable takes both sides Down on the detection time; plugged
// in again, they come back Up. A stopped Runner tells bfdd it is
// administratively down.
func TestLinkDownAndStop(t *testing.T) {
	b := startBFDLab(t)
	b.waitFor(t, Up, "up")
	pulled := time.Now()
	must(t, b.lb.SetLink(false))
	peers := b.waitFor(t, Down, "down")
	t.Logf("both sides Down %s after the cable was pulled", time.Since(pulled).Round(time.Millisecond))
	if p := peers[b.lb.Addr4]; p.Diagnostic != "control detection time expired" {
		t.Errorf("bfdd's diagnostic: %q", p.Diagnostic)
	}
	must(t, b.lb.SetLink(true))
	b.waitFor(t, Up, "up")
	b.halt()
	if got := b.runner.State("router"); got != AdminDown {
		t.Errorf("stopped session: %s", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		peers, err := b.frr.BFDPeers(t.Context())
		must(t, err)
		p := peers[b.lb.Addr4]
		if p.Status == "down" && p.RemoteDiagnostic == "administratively down" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bfdd after the agent stopped: %+v, want down, remote diagnostic administratively down", p)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// flood sends n packets from host from to host to's BFD port with the
// given TTL: a third each with a random Your Discriminator, a zero one,
// and garbage. It returns how many it sent.
func flood(t *testing.T, from, to *netlab.Host, v6 bool, ttl, n int) int {
	t.Helper()
	dst := netip.AddrPortFrom(to.Addr4, Port)
	network := "udp4"
	if v6 {
		dst, network = netip.AddrPortFrom(to.Addr6, Port), "udp6"
	}
	var conn *net.UDPConn
	must(t, from.Do(func() error {
		var err error
		conn, err = net.ListenUDP(network, nil)
		if err != nil {
			return err
		}
		if v6 {
			return ipv6.NewPacketConn(conn).SetHopLimit(ttl)
		}
		return ipv4.NewPacketConn(conn).SetTTL(ttl)
	}))
	defer conn.Close()
	for i := range n {
		var b []byte
		switch i % 3 {
		case 0:
			b = (&Packet{State: Up, DetectMult: 3, MyDiscr: uint32(i + 1), YourDiscr: randomUint32() | 1, DesiredMinTx: time.Millisecond, RequiredMinRx: time.Millisecond}).Marshal()
		case 1:
			b = (&Packet{State: Down, Diag: DiagNeighborDown, DetectMult: 1, MyDiscr: uint32(i + 1), DesiredMinTx: time.Millisecond, RequiredMinRx: time.Millisecond}).Marshal()
		default:
			b = binary.BigEndian.AppendUint64(nil, uint64(randomUint32()))
		}
		if _, err := conn.WriteToUDPAddrPort(b, dst); err != nil {
			t.Fatalf("flood %s: %v", dst, err)
		}
	}
	return n
}

// containsCompact reports whether out, with its spaces and newlines
// dropped, contains s.
func containsCompact(out []byte, s string) bool {
	compact := strings.NewReplacer(" ", "", "\n", "").Replace(string(out))
	return strings.Contains(compact, s)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

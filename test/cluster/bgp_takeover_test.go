package clustertest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/groundcloud/groundcloud/test/framework/netlab"
	"github.com/groundcloud/groundcloud/test/framework/realcluster"
	"github.com/groundcloud/groundcloud/test/images/echo"
)

// Held flows of checkProxyTakeover.
const (
	takeoverConns = 8
	linesPort     = 82 // the Service port of the echo Pods' line protocol
)

// checkProxyTakeover: a Service of the BGP pool with proxy forwarding
// (Local, its Pods on the workers, so that every host sends a flow to the
// same node) is advertised by the one host elected for its address. The
// client holds line connections and a UDP flow through it; the elected
// host's agent is killed, another host takes the address over (the
// router's route moves to it), then that host's agent is killed and the
// address moves once more. After each takeover the Pods speak first, on
// every held connection and to the UDP flow (echo's POST /push), and only
// then the client: every connection gets the Pod's line and the echo of
// its own without a reset, and the UDP flow reaches the same Pod from the
// same address and port (docs/packet-path.md, "After a failover"). The new
// holder has no conntrack entry for these flows: the node's packet to
// VIP:client-port must be dropped there, not routed back to the router, or
// the client's next packet leaves with another source port.
func (s *bgpScenario) checkProxyTakeover(t *testing.T) {
	s.nodesRouteThroughRouter(t)
	svc := deploy(t, s.c, "bgp-proxy", 2, map[string]string{anyOf: "node-1,node-2"}, inPool("bgp"), withLinesPort,
		func(svc *corev1.Service) {
			svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		})
	vip := svc.vip(t, false)
	owner := s.soleNexthop(t, vip, nil)
	waitServing(t, lbClient(s.client), url(vip))
	s.waitSameBuckets(t)
	t.Logf("%s is advertised by %s alone", vip, owner.Name)

	flows := s.holdFlows(t, vip)
	restarted := crashAgent(t, s.c, owner.Name)
	t.Logf("killed the agent of %s", owner.Name)
	next := s.soleNexthop(t, vip, owner)
	t.Logf("%s took %s over", next.Name, vip)
	flows.podsSpeakFirst(t, "taken-over-by-"+next.Name)
	// The new holder's agent crashes in turn: the address moves once more
	// (to the third host, or back to the first once its agent is back).
	restartedNext := crashAgent(t, s.c, next.Name)
	t.Logf("killed the agent of %s", next.Name)
	last := s.soleNexthop(t, vip, next)
	t.Logf("%s took %s over from %s", last.Name, vip, next.Name)
	flows.podsSpeakFirst(t, "then-by-"+last.Name)
	restarted()
	restartedNext()
}

// waitSameBuckets waits until every load-balancer host sends the flows of
// port linesPort of Service bgp-proxy to both workers, by the same
// buckets: a host that saw a worker healthy later than another would send
// some flows to the other node after a takeover, which resets them however
// the host treats the node's packets.
func (s *bgpScenario) waitSameBuckets(t *testing.T) {
	t.Helper()
	re := regexp.MustCompile(fmt.Sprintf(`(?s)map bkt-\S+-%s/bgp-proxy/tcp/%d \{.*?elements = \{(.*?)\}`, echoNS, linesPort))
	var got []string
	err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		got = got[:0]
		for _, h := range s.lbs {
			out, _ := h.Command(ctx, "nft", "list", "table", "ip", "groundcloud").Output()
			m := re.FindSubmatch(out)
			if m == nil {
				return false, nil
			}
			got = append(got, string(m[1]))
		}
		for _, w := range []string{"node-1", "node-2"} {
			if !strings.Contains(got[0], s.c.Node(w).Host.Addr4.String()+" ") {
				return false, nil
			}
		}
		return !slices.ContainsFunc(got, func(b string) bool { return b != got[0] }), nil
	})
	if err != nil {
		t.Fatalf("the hosts' buckets of bgp-proxy never named both workers alike: %q", got)
	}
}

// withLinesPort adds the echo Pods' line protocol as TCP port linesPort.
func withLinesPort(s *corev1.Service) {
	s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "lines", Protocol: corev1.ProtocolTCP, Port: linesPort, TargetPort: intstr.FromInt32(realcluster.EchoLinesPort)})
}

// nodesRouteThroughRouter routes the BGP pools' IPv4 addresses from every
// node through the router, as docs/bgp.md asks of nodes behind a proxy
// pool (their replies go to the address), until the test ends. On the
// load-balancer hosts it is the route a host's default route would be: what
// they do not translate for an address goes back to the router.
func (s *bgpScenario) nodesRouteThroughRouter(t *testing.T) {
	t.Helper()
	for _, n := range s.c.Nodes {
		if err := realcluster.RouteThrough(t.Context(), n.Host, s.r.Host, bgpRoute4); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if out, err := n.Host.Command(context.Background(), "ip", "-4", "route", "del", bgpRoute4.String()).CombinedOutput(); err != nil {
				t.Errorf("route %s on %s: %v: %s", bgpRoute4, n.Name, err, out)
			}
		})
	}
}

// soleNexthop waits until the router's route to vip has one next hop, a
// host other than not, and returns that host.
func (s *bgpScenario) soleNexthop(t *testing.T, vip netip.Addr, not *netlab.Host) *netlab.Host {
	t.Helper()
	var got []netip.Addr
	var host *netlab.Host
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		if got, err = s.r.Nexthops(ctx, netip.PrefixFrom(vip, vip.BitLen())); err != nil || len(got) != 1 {
			return false, nil
		}
		for _, h := range s.lbs {
			if h.Addr4 == got[0] && h != not {
				host = h
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the router's route to %s never had one next hop other than %v: last %v (%v)", vip, not, got, err)
	}
	return host
}

// takeoverFlows are the flows the client holds through a VIP, and where
// each reached a Pod.
type takeoverFlows struct {
	c     *realcluster.Cluster
	lines []*heldLine
	udp   *net.UDPConn
	// udpSaid is the Pod's answer to the flow's first datagram: which Pod,
	// and the address and port the flow reached it from.
	udpSaid echo.Said
}

// heldLine is a line connection and the Pod that greeted it.
type heldLine struct {
	conn net.Conn
	rd   *bufio.Reader
	pod  string
}

// holdFlows opens takeoverConns line connections and a UDP flow (held by
// its Pod for a push) from the client to vip. The client sends no TCP
// keepalive: after a takeover the node's packet must be the first the new
// holder sees.
func (s *bgpScenario) holdFlows(t *testing.T, vip netip.Addr) *takeoverFlows {
	t.Helper()
	f := &takeoverFlows{c: s.c}
	t.Cleanup(f.close)
	for range takeoverConns {
		l, err := dialLine(t.Context(), s.client, netip.AddrPortFrom(vip, linesPort))
		if err != nil {
			t.Fatal(err)
		}
		f.lines = append(f.lines, l)
	}
	err := s.client.Do(func() error {
		var err error
		f.udp, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(vip, 53)))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if f.udpSaid, err = f.exchange(); err != nil {
		t.Fatalf("the UDP flow's first datagram: %v", err)
	}
	pods := map[string]int{}
	for _, l := range f.lines {
		pods[l.pod]++
	}
	t.Logf("holding %d connections (per Pod: %v) and a UDP flow from %s (Pod %s sees it from %s)",
		len(f.lines), pods, f.udp.LocalAddr(), f.udpSaid.Pod, f.udpSaid.Client)
	return f
}

func (f *takeoverFlows) close() {
	for _, l := range f.lines {
		_ = l.conn.Close()
	}
	if f.udp != nil {
		_ = f.udp.Close()
	}
}

// dialLine opens a line connection without TCP keepalive and reads the
// Pod's greeting.
func dialLine(ctx context.Context, h *netlab.Host, addr netip.AddrPort) (*heldLine, error) {
	var conn net.Conn
	err := h.Do(func() error {
		var err error
		d := net.Dialer{Timeout: 3 * time.Second, KeepAlive: -1}
		conn, err = d.DialContext(ctx, "tcp", addr.String())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	l := &heldLine{conn: conn, rd: bufio.NewReader(conn)}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	greeting, err := l.rd.ReadString('\n')
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("greeting on %s: %w", addr, err)
	}
	l.pod, _, _ = strings.Cut(greeting, " ")
	return l, nil
}

// exchange sends "hold" on the UDP flow and returns what the answer says,
// skipping any datagram that is not an answer (a push).
func (f *takeoverFlows) exchange() (echo.Said, error) {
	_ = f.udp.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := f.udp.Write([]byte("hold")); err != nil {
		return echo.Said{}, err
	}
	buf := make([]byte, 2048)
	for {
		n, err := f.udp.Read(buf)
		if err != nil {
			return echo.Said{}, err
		}
		if said, err := echo.Parse(string(buf[:n])); err == nil {
			return said, nil
		}
	}
}

// podsSpeakFirst has every Pod push text on the flows it holds, then
// the client write on each: every connection must get the pushed line and
// the echo of the client's, and the UDP flow must reach the Pod it reached
// first, from the same address and port.
func (f *takeoverFlows) podsSpeakFirst(t *testing.T, text string) {
	t.Helper()
	lines, datagrams := f.push(t, text)
	t.Logf("%s: the Pods pushed on %d connections and to %d UDP peers", text, lines, datagrams)
	if lines == 0 || datagrams == 0 {
		t.Errorf("%s: the Pods pushed on %d connections and to %d UDP peers, want some of each", text, lines, datagrams)
	}
	time.Sleep(300 * time.Millisecond) // the nodes' first tries reach the host
	kept := 0
	for i, l := range f.lines {
		if err := l.clientWrites(text); err != nil {
			t.Errorf("%s: connection #%d (Pod %s): %v", text, i, l.pod, err)
			continue
		}
		kept++
	}
	said, err := f.exchange()
	switch {
	case err != nil:
		t.Errorf("%s: the UDP flow's datagram after the Pod's: %v", text, err)
	case said.Pod != f.udpSaid.Pod || said.Client != f.udpSaid.Client:
		t.Errorf("%s: the UDP flow's datagram after the Pod's reached %s from %s, the first reached %s from %s: another flow",
			text, said.Pod, said.Client, f.udpSaid.Pod, f.udpSaid.Client)
	default:
		t.Logf("%s: the UDP flow still reaches %s from %s", text, said.Pod, said.Client)
	}
	t.Logf("%s: %d of %d connections carried the Pod's line and the client's", text, kept, len(f.lines))
}

// clientWrites sends a line after the Pod pushed text and reads both the
// pushed line and the echo, in that order, as the Pod sent them.
func (l *heldLine) clientWrites(text string) error {
	_ = l.conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(l.conn, text+" from the client\n"); err != nil {
		return fmt.Errorf("the client's write: %w", err)
	}
	for _, want := range []string{l.pod + " " + text + "\n", l.pod + " " + text + " from the client\n"} {
		got, err := l.rd.ReadString('\n')
		if err != nil {
			return fmt.Errorf("reading %q: %w", want, err)
		}
		if got != want {
			return fmt.Errorf("read %q, want %q", got, want)
		}
	}
	return nil
}

// push asks every Pod of the Service, at its own address, to push text
// (echo's POST /push), and returns on how many connections and to how
// many UDP peers they did.
func (f *takeoverFlows) push(t *testing.T, text string) (lines, datagrams int) {
	t.Helper()
	pods, err := f.c.Client.CoreV1().Pods(echoNS).List(t.Context(), metav1.ListOptions{LabelSelector: "app=bgp-proxy"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		client := lbClient(f.c.Node(p.Spec.NodeName).Host)
		u := fmt.Sprintf("http://%s/push?text=%s", netip.AddrPortFrom(netip.MustParseAddr(p.Status.PodIP), realcluster.EchoHTTPPort), text)
		resp, err := client.Post(u, "text/plain", nil)
		if err != nil {
			t.Fatalf("push through %s: %v", p.Name, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		var l, d int
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("push through %s: %d %q (%v)", p.Name, resp.StatusCode, body, err)
		}
		if _, err := fmt.Sscanf(string(body), echo.Pushed, &l, &d); err != nil {
			t.Fatalf("push through %s answered %q: %v", p.Name, body, err)
		}
		lines += l
		datagrams += d
	}
	return lines, datagrams
}

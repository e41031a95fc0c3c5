package realcluster

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// The apiserver runs on the machine's loopback, outside the lab; what it
// opens towards the cluster (kubectl exec, logs and port-forward to a
// kubelet; the proxy subresources to Pods and Services) goes through its
// egress selector, as with the Kubernetes network proxy
// (konnectivity): "cluster" traffic is an HTTP CONNECT over a unix socket
// to egressProxy, which opens the connection from inside the lab — from
// the node that has the address, or else from a node whose link is up. A
// node whose cable is pulled (Node.SetLink) cannot be reached, as in a
// real cluster.

// egressConfig is the apiserver's EgressSelectorConfiguration.
func egressConfig(socket string) string {
	return fmt.Sprintf(`apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: %s
`, socket)
}

// egressProxy serves HTTP CONNECT on a unix socket.
type egressProxy struct {
	c  *Cluster
	ln net.Listener
	wg sync.WaitGroup
	mu sync.Mutex
	// conns are the open connections, both ends, closed by close.
	conns map[net.Conn]struct{}
}

// startEgress writes the egress configuration into dir and starts the
// proxy; it returns the configuration's path.
func (c *Cluster) startEgress(dir string) (string, *egressProxy, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, err
	}
	socket := filepath.Join(dir, "egress.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		return "", nil, fmt.Errorf("egress proxy: %w", err)
	}
	conf := filepath.Join(dir, "egress-selector.yaml")
	if err := os.WriteFile(conf, []byte(egressConfig(socket)), 0o600); err != nil {
		ln.Close()
		return "", nil, err
	}
	p := &egressProxy{c: c, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.serve)
	return conf, p, nil
}

func (p *egressProxy) serve() {
	for {
		conn, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(conn) {
			conn.Close()
			return
		}
		p.wg.Go(func() { p.handle(conn) })
	}
}

func (p *egressProxy) handle(conn net.Conn) {
	defer p.untrack(conn)
	br := bufio.NewReader(conn)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	if req.Method != http.MethodConnect {
		fmt.Fprintf(conn, "HTTP/1.1 405 Method Not Allowed\r\n\r\n")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	out, err := p.dial(ctx, req.Host)
	cancel()
	if err != nil {
		fmt.Fprintf(conn, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\n\r\n%v\n", err)
		return
	}
	if !p.track(out) {
		out.Close()
		return
	}
	defer p.untrack(out)
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(out, br); done <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, out); done <- struct{}{} }()
	<-done
}

// dial opens a connection to target ("<address>:<port>") from inside the
// lab.
func (p *egressProxy) dial(ctx context.Context, target string) (net.Conn, error) {
	ap, err := netip.ParseAddrPort(target)
	if err != nil {
		return nil, fmt.Errorf("egress to %s: want an address and a port", target)
	}
	n := p.c.nodeFor(ap.Addr())
	if n == nil {
		return nil, fmt.Errorf("egress to %s: no node of the cluster can reach it", target)
	}
	return n.Host.DialTCP(ctx, ap)
}

// nodeFor is the node to open a connection to a from: the node that has
// the address if its link is up, else the first node whose link is up (nil
// if a's node is cut off, or no node's link is up).
func (c *Cluster) nodeFor(a netip.Addr) *Node {
	c.mu.Lock()
	nodes := append([]*Node(nil), c.Nodes...)
	c.mu.Unlock()
	up := func(n *Node) bool { return n.apiRelay != nil && !n.apiRelay.Blocked() && !n.stopped }
	for _, n := range nodes {
		if n.Host.Addr4 == a || n.Host.Addr6 == a {
			if up(n) {
				return n
			}
			return nil
		}
	}
	for _, n := range nodes {
		if up(n) {
			return n
		}
	}
	return nil
}

func (p *egressProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *egressProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// close stops the proxy and closes every connection it carries.
func (p *egressProxy) close() error {
	err := p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

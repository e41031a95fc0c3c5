package nodesim

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Server is a simulated node's listeners, on every address of both
// families. Its protocol:
//
//   - TCP NodePort: on accept it writes "<name> <client ip:port>\n", then
//     answers each line it reads with "<name> <line>\n" until the client
//     closes, so a long-lived connection can be pinged through.
//   - UDP NodePort: each datagram is answered with "<name> <client ip:port>".
//   - kube-proxy healthz port and health node ports: see Config.StateDir.
//
// Client addresses are as the node saw them, IPv4 in dotted form and IPv6
// in brackets.
type Server struct {
	cfg    Config
	health health
	tcp    []net.Listener
	udp    []*net.UDPConn
	http   []httpListener

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]bool
}

type httpListener struct {
	ln  net.Listener
	srv *http.Server
}

// Listen validates cfg and opens every listener, on each port for IPv4
// and IPv6. It starts nothing: Run serves. Sockets live in the network
// namespace of the calling thread.
func Listen(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	s := &Server{cfg: cfg, health: health{stateDir: cfg.StateDir, name: cfg.Name}, conns: map[net.Conn]bool{}}
	if err := s.listen(); err != nil {
		s.Close()
		return nil, fmt.Errorf("listen: %w", err)
	}
	return s, nil
}

func (s *Server) listen() error {
	for _, family := range []string{"4", "6"} {
		for _, port := range s.cfg.TCPPorts {
			ln, err := net.Listen("tcp"+family, fmt.Sprintf(":%d", port))
			if err != nil {
				return err
			}
			s.tcp = append(s.tcp, ln)
		}
		for _, port := range s.cfg.UDPPorts {
			conn, err := net.ListenUDP("udp"+family, &net.UDPAddr{Port: int(port)})
			if err != nil {
				return err
			}
			s.udp = append(s.udp, conn)
			if err := recvDstAddr(conn, family); err != nil {
				return err
			}
		}
		handlers := map[uint16]http.Handler{}
		if p := s.cfg.KubeProxyHealthzPort; p != 0 {
			handlers[p] = s.health.kubeProxyHealthz(p)
		}
		for _, p := range s.cfg.HealthNodePorts {
			handlers[p] = s.health.serviceHealth(p)
		}
		for _, p := range s.cfg.HTTPPorts {
			handlers[p] = s.hello()
		}
		for port, h := range handlers {
			ln, err := net.Listen("tcp"+family, fmt.Sprintf(":%d", port))
			if err != nil {
				return err
			}
			srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
			s.http = append(s.http, httpListener{ln: ln, srv: srv})
		}
	}
	return nil
}

// Run serves until ctx is done, then closes every listener and connection
// and returns nil once all its goroutines have ended.
func (s *Server) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, ln := range s.tcp {
		wg.Go(func() { s.acceptLoop(ln) })
	}
	for _, conn := range s.udp {
		// Several readers per socket, so that one port's answers are not
		// bound to one goroutine (a benchmark's load on one node).
		for range udpReaders {
			wg.Go(func() { s.udpLoop(conn) })
		}
	}
	for _, h := range s.http {
		wg.Go(func() { _ = h.srv.Serve(h.ln) })
	}
	<-ctx.Done()
	s.Close()
	wg.Wait()
	return nil
}

// Close closes every listener and open connection. Run calls it; call it
// directly only for a Server that never runs.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	conns := s.conns
	s.conns = map[net.Conn]bool{}
	s.mu.Unlock()
	for c := range conns {
		c.Close()
	}
	for _, ln := range s.tcp {
		ln.Close()
	}
	for _, c := range s.udp {
		c.Close()
	}
	for _, h := range s.http {
		h.srv.Close()
		h.ln.Close() // in case Serve never ran
	}
}

func (s *Server) acceptLoop(ln net.Listener) {
	for {
		conn, err := ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil { // e.g. out of descriptors: try again shortly
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if !s.track(conn) {
			conn.Close()
			return
		}
		go s.serveConn(conn)
	}
}

// track adds conn to the connections Close closes; false once closed.
func (s *Server) track(conn net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[conn] = true
	return true
}

func (s *Server) serveConn(conn net.Conn) {
	defer func() {
		s.mu.Lock()
		delete(s.conns, conn)
		s.mu.Unlock()
		conn.Close()
	}()
	w := bufio.NewWriter(conn)
	fmt.Fprintf(w, "%s %s\n", s.cfg.Name, clientAddr(conn.RemoteAddr()))
	if w.Flush() != nil {
		return
	}
	lines := bufio.NewScanner(conn)
	for lines.Scan() {
		fmt.Fprintf(w, "%s %s\n", s.cfg.Name, lines.Text())
		if w.Flush() != nil {
			return
		}
	}
}

// udpReaders is the number of goroutines reading each UDP socket.
var udpReaders = max(2, runtime.NumCPU())

// udpLoop answers each datagram from the address it was sent to (a
// connected client accepts nothing else), not from whichever address the
// route back would pick: a node may have several, e.g. on its loopback.
func (s *Server) udpLoop(conn *net.UDPConn) {
	buf := make([]byte, 64<<10)
	oob := make([]byte, 256)
	var reply []byte
	for {
		_, oobn, _, from, err := conn.ReadMsgUDPAddrPort(buf, oob)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		reply = fmt.Appendf(reply[:0], "%s %s", s.cfg.Name, netip.AddrPortFrom(from.Addr().Unmap(), from.Port()))
		if src := replySource(oob[:oobn]); src != nil {
			if _, _, err := conn.WriteMsgUDPAddrPort(reply, src, from); err == nil {
				continue
			}
		}
		_, _ = conn.WriteToUDPAddrPort(reply, from)
	}
}

// recvDstAddr asks the kernel for each datagram's destination address
// (IP_PKTINFO, IPV6_RECVPKTINFO).
func recvDstAddr(conn *net.UDPConn, family string) error {
	rc, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		if family == "4" {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_PKTINFO, 1)
		} else {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_RECVPKTINFO, 1)
		}
	})
	return errors.Join(err, serr)
}

// replySource turns the packet info of a received datagram into the
// control message that sends the answer from its destination address;
// nil when there is none or it is not a unicast address.
func replySource(oob []byte) []byte {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	for _, m := range msgs {
		switch {
		case m.Header.Level == unix.IPPROTO_IP && m.Header.Type == unix.IP_PKTINFO && len(m.Data) >= unix.SizeofInet4Pktinfo:
			// struct in_pktinfo: ifindex, spec_dst, addr (the header's destination)
			if dst := netip.AddrFrom4([4]byte(m.Data[8:12])); dst.IsGlobalUnicast() || dst.IsLoopback() {
				return unix.PktInfo4(&unix.Inet4Pktinfo{Spec_dst: dst.As4()})
			}
		case m.Header.Level == unix.IPPROTO_IPV6 && m.Header.Type == unix.IPV6_PKTINFO && len(m.Data) >= unix.SizeofInet6Pktinfo:
			// struct in6_pktinfo: addr (the header's destination), ifindex
			if dst := netip.AddrFrom16([16]byte(m.Data[:16])); dst.IsGlobalUnicast() || dst.IsLoopback() {
				return unix.PktInfo6(&unix.Inet6Pktinfo{Addr: dst.As16()})
			}
		}
	}
	return nil
}

// clientAddr formats a TCP peer as "ip:port" / "[ip]:port".
func clientAddr(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	ap := tcp.AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String()
}

// Main parses flags, listens, writes "nodesim: ready" to stdout and serves
// until ctx is done. It is the whole of test/images/nodesim/groundcloud-nodesim.
func Main(ctx context.Context, name string, args []string, stdout io.Writer) error {
	cfg, err := ParseFlags(name, args)
	if err != nil {
		return err
	}
	s, err := Listen(cfg)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "nodesim: ready")
	return s.Run(ctx)
}

// hello answers every request with the node's name and the client address
// it sees, like a tiny web application behind a NodePort.
func (s *Server) hello() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "hello from %s (you are %s)\n", s.cfg.Name, r.RemoteAddr)
	})
}

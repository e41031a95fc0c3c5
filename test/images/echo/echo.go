package echo

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"strconv"
	"time"
)

// MaxSize is the largest answer a client may ask for with ?bytes=N.
const MaxSize = 64 << 20

// Config is what an echo server says about itself and where it listens.
type Config struct {
	// Pod and Node name the answering Pod and its Node.
	Pod, Node string
	// HTTPAddr, UDPAddr and LinesAddr are listen addresses (":8080");
	// empty: none.
	HTTPAddr, UDPAddr, LinesAddr string
}

// Answer is the line sent to a client at remote (ip:port as the Pod saw
// it).
func (c Config) Answer(remote string) string {
	return fmt.Sprintf("hello from %s on %s (you are %s)\n", c.Pod, c.Node, remote)
}

// Run serves until ctx is done.
func Run(ctx context.Context, c Config) error {
	if c.HTTPAddr == "" && c.UDPAddr == "" && c.LinesAddr == "" {
		return errors.New("echo: nothing to listen on")
	}
	errc := make(chan error, 3)
	h := newHeld()
	if c.HTTPAddr != "" {
		mux := http.NewServeMux()
		mux.Handle("/", c)
		mux.Handle("POST /push", c.pushHandler(h))
		srv := &http.Server{Addr: c.HTTPAddr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() { errc <- srv.ListenAndServe() }()
		stop := context.AfterFunc(ctx, func() { _ = srv.Close() })
		defer stop()
	}
	if c.UDPAddr != "" {
		conn, err := net.ListenPacket("udp", c.UDPAddr)
		if err != nil {
			return fmt.Errorf("echo: %w", err)
		}
		stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
		defer stop()
		go func() { errc <- c.serveUDP(conn, h) }()
	}
	if c.LinesAddr != "" {
		ln, err := net.Listen("tcp", c.LinesAddr)
		if err != nil {
			return fmt.Errorf("echo: %w", err)
		}
		stop := context.AfterFunc(ctx, func() { _ = ln.Close() })
		defer stop()
		go func() { errc <- c.serveLines(ln, h) }()
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-errc:
		return fmt.Errorf("echo: %w", err)
	}
}

// ServeHTTP answers every request with Answer; with the query ?bytes=N
// (N up to MaxSize) the answer is padded with dots and a final newline to
// N bytes in all, for clients that measure bulk transfers.
func (c Config) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	answer := []byte(c.Answer(r.RemoteAddr))
	if q := r.URL.Query().Get("bytes"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 0 || n > MaxSize {
			http.Error(w, fmt.Sprintf("bytes: want a size from 0 to %d", MaxSize), http.StatusBadRequest)
			return
		}
		answer = Pad(answer, n)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
	_, _ = w.Write(answer)
}

// Pad returns answer padded to n bytes (dots, then a newline); answer
// itself when it is not shorter than n.
func Pad(answer []byte, n int) []byte {
	if len(answer) >= n {
		return answer
	}
	out := make([]byte, n)
	copy(out, answer)
	copy(out[len(answer):], bytes.Repeat([]byte{'.'}, n-len(answer)))
	out[n-1] = '\n'
	return out
}

// Said is what an answer says: which Pod on which Node answered, and the
// client address it saw.
type Said struct {
	Pod, Node string
	Client    netip.AddrPort
}

var answerRE = regexp.MustCompile(`^hello from (\S+) on (\S+) \(you are (\S+)\)(?:\n|\s*$)`)

// Parse reads an answer (its first line; padding after it is ignored).
func Parse(s string) (Said, error) {
	m := answerRE.FindStringSubmatch(s)
	if m == nil {
		return Said{}, fmt.Errorf("echo: not an answer: %.80q", s)
	}
	client, err := netip.ParseAddrPort(m[3])
	if err != nil {
		return Said{}, fmt.Errorf("echo: client address in %.80q: %w", s, err)
	}
	return Said{Pod: m[1], Node: m[2], Client: client}, nil
}

// serveLines speaks the line protocol of long-lived connections: a
// greeting "<pod> <client address>" on connect, then every line the client
// sends back prefixed with the Pod's name, until the client closes. It is
// what test/framework/availability's client measures with. A push (POST
// /push) writes its line on every open connection.
func (c Config) serveLines(ln net.Listener, h *held) error {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return err
		}
		go c.lines(conn, h)
	}
}

func (c Config) lines(conn net.Conn, h *held) {
	defer conn.Close()
	l := &lineConn{w: bufio.NewWriter(conn)}
	// Held before the greeting goes out, and a push waits for it (l.mu):
	// a client that has read the greeting gets every push after it.
	l.mu.Lock()
	h.addLine(l)
	defer h.removeLine(l)
	fmt.Fprintf(l.w, "%s %s\n", c.Pod, conn.RemoteAddr())
	err := l.w.Flush()
	l.mu.Unlock()
	if err != nil {
		return
	}
	in := bufio.NewScanner(conn)
	for in.Scan() {
		if l.writeLine("%s %s\n", c.Pod, in.Text()) != nil {
			return
		}
	}
}

// serveUDP answers each datagram with Answer; a sender whose datagram
// says "hold" is also held for a push (POST /push).
func (c Config) serveUDP(conn net.PacketConn, h *held) error {
	buf := make([]byte, 64<<10)
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			return err
		}
		if string(buf[:n]) == "hold" {
			h.holdPeer(conn, from)
		}
		_, _ = conn.WriteTo([]byte(c.Answer(from.String())), from)
	}
}

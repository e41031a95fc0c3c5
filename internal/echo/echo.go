package echo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Config is what an echo server says about itself and where it listens.
type Config struct {
	// Pod and Node name the answering Pod and its Node.
	Pod, Node string
	// HTTPAddr and UDPAddr are listen addresses (":8080"); empty: none.
	HTTPAddr, UDPAddr string
}

// Answer is the line sent to a client at remote (ip:port as the Pod saw
// it).
func (c Config) Answer(remote string) string {
	return fmt.Sprintf("hello from %s on %s (you are %s)\n", c.Pod, c.Node, remote)
}

// Run serves until ctx is done.
func Run(ctx context.Context, c Config) error {
	if c.HTTPAddr == "" && c.UDPAddr == "" {
		return errors.New("echo: nothing to listen on")
	}
	errc := make(chan error, 2)
	if c.HTTPAddr != "" {
		srv := &http.Server{Addr: c.HTTPAddr, Handler: c, ReadHeaderTimeout: 5 * time.Second}
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
		go func() { errc <- c.serveUDP(conn) }()
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-errc:
		return fmt.Errorf("echo: %w", err)
	}
}

// ServeHTTP answers every request with Answer.
func (c Config) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte(c.Answer(r.RemoteAddr)))
}

// serveUDP answers each datagram with Answer.
func (c Config) serveUDP(conn net.PacketConn) error {
	buf := make([]byte, 64<<10)
	for {
		_, from, err := conn.ReadFrom(buf)
		if err != nil {
			return err
		}
		_, _ = conn.WriteTo([]byte(c.Answer(from.String())), from)
	}
}

package netlab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Forwarder relays TCP connections between a lab host and the root
// namespace: accepted inside a host and dialled from the root namespace
// (Forward), or accepted on the root namespace's loopback and dialled
// inside a host (ForwardInto).
type Forwarder struct {
	ln      net.Listener
	dial    func() (net.Conn, error)
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	blocked bool
	delay   time.Duration
}

// ForwardLoopback makes addr, a host:port on the root namespace's loopback
// (an apiserver of the test bed, say), reachable at the same address inside
// h. Connections are accepted inside h and dialled from this process's
// threads in the root namespace; nothing in the root namespace changes.
// Close the Forwarder to stop; it is also closed with ctx.
func (h *Host) ForwardLoopback(ctx context.Context, addr string) (*Forwarder, error) {
	return h.Forward(ctx, addr, addr)
}

// Forward accepts TCP connections on listen inside h and relays them to
// target, dialled from this process's threads in the root namespace (an
// apiserver on the root namespace's loopback, reached at an address of the
// lab's choosing). Nothing in the root namespace changes.
func (h *Host) Forward(ctx context.Context, listen, target string) (*Forwarder, error) {
	f := &Forwarder{conns: map[net.Conn]struct{}{}, dial: func() (net.Conn, error) {
		return net.DialTimeout("tcp", target, 5*time.Second)
	}}
	if err := h.Do(func() (err error) {
		f.ln, err = net.Listen("tcp", listen)
		return err
	}); err != nil {
		return nil, fmt.Errorf("lab: forward %s in %s to %s: %w", listen, h.Name, target, err)
	}
	f.serve(ctx)
	return f, nil
}

// ForwardInto accepts TCP connections on a free port of the root
// namespace's loopback (Addr) and relays them to target, dialled inside h:
// a process of the test bed in the root namespace (a controller manager)
// reaches a server of the lab (a BMC) that way. Nothing in the root
// namespace changes but a socket listening on loopback.
func (h *Host) ForwardInto(ctx context.Context, target netip.AddrPort) (*Forwarder, error) {
	f := &Forwarder{conns: map[net.Conn]struct{}{}, dial: func() (net.Conn, error) {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return h.DialTCP(dctx, target)
	}}
	var err error
	if f.ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("lab: forward loopback to %s in %s: %w", target, h.Name, err)
	}
	f.serve(ctx)
	return f, nil
}

// Addr is where the Forwarder accepts connections.
func (f *Forwarder) Addr() string { return f.ln.Addr().String() }

// serve accepts and relays until Close, or until ctx ends.
func (f *Forwarder) serve(ctx context.Context) {
	stop := context.AfterFunc(ctx, func() { _ = f.Close() })
	f.wg.Go(func() {
		defer stop()
		for {
			in, err := f.ln.Accept()
			if err != nil {
				return
			}
			f.wg.Go(func() { f.relay(in) })
		}
	})
}

func (f *Forwarder) relay(in net.Conn) {
	defer in.Close()
	if f.isBlocked() {
		return
	}
	if d := f.currentDelay(); d > 0 {
		time.Sleep(d)
	}
	out, err := f.dial()
	if err != nil {
		return
	}
	defer out.Close()
	if !f.track(in, out) {
		return
	}
	defer f.untrack(in, out)
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(out, in)
		if tc, ok := out.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		close(done)
	}()
	_, _ = io.Copy(in, out)
	<-done
}

// SetDelay holds each new connection for d before it is relayed to the
// target (0: none), as a slow server would: a BMC that answers after its
// client's timeout. The target sees nothing of a held connection, so a
// server that serves one connection at a time is not held up by it.
func (f *Forwarder) SetDelay(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.delay = d
}

func (f *Forwarder) currentDelay() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.delay
}

// SetBlocked cuts the relay (every relayed connection closed, new ones
// closed at once) or restores it, as a network between the two ends would.
func (f *Forwarder) SetBlocked(blocked bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.blocked = blocked
	if blocked {
		for c := range f.conns {
			_ = c.Close()
		}
	}
}

// Blocked says whether SetBlocked cut the relay.
func (f *Forwarder) Blocked() bool { return f.isBlocked() }

func (f *Forwarder) isBlocked() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.blocked
}

func (f *Forwarder) track(cs ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns == nil || f.blocked {
		return false
	}
	for _, c := range cs {
		f.conns[c] = struct{}{}
	}
	return true
}

func (f *Forwarder) untrack(cs ...net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range cs {
		delete(f.conns, c)
	}
}

// Close stops accepting, closes every relayed connection and waits.
func (f *Forwarder) Close() error {
	err := f.ln.Close()
	f.mu.Lock()
	for c := range f.conns {
		_ = c.Close()
	}
	f.conns = nil
	f.mu.Unlock()
	f.wg.Wait()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

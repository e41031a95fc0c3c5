package availability

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

// Options configure a Client.
type Options struct {
	From *netlab.Host
	To   netip.AddrPort
	// Every is the time between two new connections (default 20ms).
	Every time.Duration
	// Timeout bounds one new connection, connect and greeting (default
	// 500ms: less than TCP's first SYN retransmission after 1 s, so an
	// attempt says whether its first SYN was answered).
	Timeout time.Duration
	// Held long-lived connections are opened at Start (default 4; -1: none)
	// and pinged every PingEvery (default 100ms); a ping may take up to
	// StallLimit (default 30s) before the connection counts as broken.
	Held                  int
	PingEvery, StallLimit time.Duration
}

func (o Options) withDefaults() Options {
	if o.Every == 0 {
		o.Every = 20 * time.Millisecond
	}
	if o.Timeout == 0 {
		o.Timeout = 500 * time.Millisecond
	}
	if o.Held == 0 {
		o.Held = 4
	}
	if o.PingEvery == 0 {
		o.PingEvery = 100 * time.Millisecond
	}
	if o.StallLimit == 0 {
		o.StallLimit = 30 * time.Second
	}
	return o
}

// Conn is a long-lived connection's record.
type Conn struct {
	Node string
	// Pings answered, the longest wait for an answer, and when the last
	// answer came.
	Pings    int
	MaxStall time.Duration
	LastPong time.Time
	// Err ends the connection: reset, closed, a wrong answer, or a stall
	// over the limit.
	Err error
}

// Client is a TCP client in a lab host, connecting to one address.
type Client struct {
	opts Options
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu       sync.Mutex
	attempts []Attempt
	conns    []*Conn
}

// Start opens the long-lived connections (failing if one cannot be
// opened) and starts making new ones.
func Start(ctx context.Context, o Options) (*Client, error) {
	o = o.withDefaults()
	ctx, cancel := context.WithCancel(ctx)
	c := &Client{opts: o, stop: cancel}
	for range max(o.Held, 0) {
		conn, r, node, err := c.dial(ctx, time.Now().Add(2*time.Second))
		if err != nil {
			cancel()
			c.wg.Wait()
			return nil, fmt.Errorf("long-lived connection to %s: %w", o.To, err)
		}
		rec := &Conn{Node: node, LastPong: time.Now()}
		c.conns = append(c.conns, rec)
		c.wg.Go(func() { c.hold(ctx, conn, r, rec) })
	}
	c.wg.Go(func() { c.connectLoop(ctx) })
	return c, nil
}

// dial connects and reads the node's greeting "<name> <client>".
func (c *Client) dial(ctx context.Context, deadline time.Time) (net.Conn, *bufio.Reader, string, error) {
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	conn, err := c.opts.From.DialTCP(dctx, c.opts.To)
	if err != nil {
		return nil, nil, "", err
	}
	_ = conn.SetReadDeadline(deadline)
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		conn.Close()
		return nil, nil, "", fmt.Errorf("greeting: %w", err)
	}
	f := strings.Fields(line)
	if len(f) < 2 {
		conn.Close()
		return nil, nil, "", fmt.Errorf("greeting %q", line)
	}
	_ = conn.SetReadDeadline(time.Time{})
	return conn, r, f[0], nil
}

func (c *Client) connectLoop(ctx context.Context) {
	t := time.NewTicker(c.opts.Every)
	defer t.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		wg.Go(func() {
			start := time.Now()
			conn, _, node, err := c.dial(ctx, start.Add(c.opts.Timeout))
			if ctx.Err() != nil {
				return // stopping: not a result
			}
			if conn != nil {
				conn.Close()
			}
			c.mu.Lock()
			c.attempts = append(c.attempts, Attempt{Start: start, Took: time.Since(start), Node: node, Err: err})
			c.mu.Unlock()
		})
	}
}

// hold pings one long-lived connection until ctx ends or it breaks.
func (c *Client) hold(ctx context.Context, conn net.Conn, r *bufio.Reader, rec *Conn) {
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(c.opts.PingEvery):
		}
		sent := time.Now()
		_ = conn.SetDeadline(sent.Add(c.opts.StallLimit))
		msg := fmt.Sprintf("ping-%d", n)
		_, err := fmt.Fprintf(conn, "%s\n", msg)
		var line string
		if err == nil {
			line, err = r.ReadString('\n')
		}
		if ctx.Err() != nil {
			return
		}
		if err == nil && strings.TrimSpace(line) != rec.Node+" "+msg {
			err = fmt.Errorf("answer %q to %q", strings.TrimSpace(line), msg)
		}
		c.mu.Lock()
		if err != nil {
			rec.Err = err
		} else {
			rec.Pings++
			rec.MaxStall = max(rec.MaxStall, time.Since(sent))
			rec.LastPong = time.Now()
		}
		c.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// Attempts returns the new connections made so far.
func (c *Client) Attempts() []Attempt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.attempts)
}

// Conns returns the long-lived connections' records.
func (c *Client) Conns() []Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Conn, len(c.conns))
	for i, r := range c.conns {
		out[i] = *r
	}
	return out
}

// Stop stops connecting and closes the long-lived connections.
func (c *Client) Stop() {
	c.stop()
	c.wg.Wait()
}

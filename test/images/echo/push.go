package echo

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"sync"
)

// maxHeldPeers bounds the UDP peers a server holds for a push.
const maxHeldPeers = 1024

// held are the line connections open and the UDP peers that asked to be
// held (a datagram "hold"): what a push writes to, so that a test can have
// the Pod speak first on a flow that is already established.
type held struct {
	mu    sync.Mutex
	lines map[*lineConn]struct{}
	peers map[string]heldPeer
}

// lineConn is one line connection's writer, shared by its echo and pushes.
type lineConn struct {
	mu sync.Mutex
	w  *bufio.Writer
}

// heldPeer is a UDP peer and the socket it wrote to.
type heldPeer struct {
	conn net.PacketConn
	addr net.Addr
}

func newHeld() *held {
	return &held{lines: map[*lineConn]struct{}{}, peers: map[string]heldPeer{}}
}

// writeLine writes one line, whole, and flushes it.
func (l *lineConn) writeLine(format string, args ...any) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format, args...)
	return l.w.Flush()
}

func (h *held) addLine(l *lineConn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lines[l] = struct{}{}
}

func (h *held) removeLine(l *lineConn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.lines, l)
}

// holdPeer remembers a UDP peer (up to maxHeldPeers).
func (h *held) holdPeer(conn net.PacketConn, addr net.Addr) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.peers[addr.String()]; ok || len(h.peers) < maxHeldPeers {
		h.peers[addr.String()] = heldPeer{conn: conn, addr: addr}
	}
}

// push writes "<pod> <text>" as a line on every open line connection and
// as a datagram to every held UDP peer, and says to how many of each.
func (h *held) push(pod, text string) (lines, datagrams int) {
	h.mu.Lock()
	conns := make([]*lineConn, 0, len(h.lines))
	for l := range h.lines {
		conns = append(conns, l)
	}
	peers := make([]heldPeer, 0, len(h.peers))
	for _, p := range h.peers {
		peers = append(peers, p)
	}
	h.mu.Unlock()
	for _, l := range conns {
		if l.writeLine("%s %s\n", pod, text) == nil {
			lines++
		}
	}
	for _, p := range peers {
		if _, err := p.conn.WriteTo([]byte(pod+" "+text), p.addr); err == nil {
			datagrams++
		}
	}
	return lines, datagrams
}

// Pushed is the answer to POST /push?text=T.
const Pushed = "pushed to %d line connections and %d UDP peers\n"

// pushHandler serves POST /push?text=T: the Pod writes T first on every
// flow it holds (held.push) and answers Pushed.
func (c Config) pushHandler(h *held) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		text := r.URL.Query().Get("text")
		if text == "" {
			http.Error(w, "text: want what to push", http.StatusBadRequest)
			return
		}
		lines, datagrams := h.push(c.Pod, text)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, Pushed, lines, datagrams)
	}
}

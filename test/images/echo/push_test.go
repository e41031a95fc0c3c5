package echo

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestPush: POST /push writes its text first on every open line
// connection and to every UDP peer that asked to be held, and says how
// many it reached; a peer that did not ask is not written to.
func TestPush(t *testing.T) {
	c := Config{Pod: "p-1", Node: "n"}
	h := newHeld()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() { _ = c.serveLines(ln, h) }()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() { _ = c.serveUDP(pc, h) }()

	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(conn)
	if _, err := r.ReadString('\n'); err != nil { // the greeting: the connection is held
		t.Fatal(err)
	}
	udp := func(payload string) net.Conn {
		u, err := net.Dial("udp", pc.LocalAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { u.Close() })
		_ = u.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := u.Write([]byte(payload)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 512)
		if n, err := u.Read(buf); err != nil || string(buf[:n]) != c.Answer(u.LocalAddr().String()) {
			t.Fatalf("answer to %q: %q, %v", payload, buf[:n], err)
		}
		return u
	}
	heldPeer, other := udp("hold"), udp("x")

	rec := httptest.NewRecorder()
	c.pushHandler(h)(rec, httptest.NewRequest(http.MethodPost, "/push?text=first", nil))
	body, _ := io.ReadAll(rec.Body)
	if want := "pushed to 1 line connections and 1 UDP peers\n"; rec.Code != http.StatusOK || string(body) != want {
		t.Errorf("push answered %d %q, want 200 %q", rec.Code, body, want)
	}
	if line, err := r.ReadString('\n'); err != nil || line != "p-1 first\n" {
		t.Errorf("pushed line %q, %v", line, err)
	}
	buf := make([]byte, 512)
	if n, err := heldPeer.Read(buf); err != nil || string(buf[:n]) != "p-1 first" {
		t.Errorf("pushed datagram %q, %v", buf[:n], err)
	}
	_ = other.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, err := other.Read(buf); err == nil {
		t.Errorf("a peer that did not ask to be held got %q", buf[:n])
	}
	// The echo goes on after the push.
	if _, err := io.WriteString(conn, "after\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); err != nil || line != "p-1 after\n" {
		t.Errorf("echo after the push %q, %v", line, err)
	}

	rec = httptest.NewRecorder()
	c.pushHandler(h)(rec, httptest.NewRequest(http.MethodPost, "/push", nil))
	if rec.Code != http.StatusBadRequest {
		t.Errorf("push without text: %d, want 400", rec.Code)
	}
}

package echo

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"
)

func TestAnswer(t *testing.T) {
	c := Config{Pod: "hello-1", Node: "node-2"}
	if got, want := c.Answer("192.0.2.9:4242"), "hello from hello-1 on node-2 (you are 192.0.2.9:4242)\n"; got != want {
		t.Errorf("Answer = %q, want %q", got, want)
	}
}

func TestServeHTTP(t *testing.T) {
	c := Config{Pod: "p", Node: "n"}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/anything", nil)
	req.RemoteAddr = "198.51.100.7:1000"
	c.ServeHTTP(rec, req)
	body, _ := io.ReadAll(rec.Body)
	if got, want := string(body), c.Answer("198.51.100.7:1000"); got != want {
		t.Errorf("body %q, want %q", got, want)
	}
}

// TestUDP: a datagram on loopback gets the answer naming its sender.
func TestUDP(t *testing.T) {
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := Config{Pod: "p", Node: "n"}
	go func() { _ = c.serveUDP(conn, newHeld()) }()
	t.Cleanup(func() { conn.Close() })

	client, err := net.Dial("udp", conn.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	_ = client.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := client.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 512)
	n, err := client.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(buf[:n]), c.Answer(client.LocalAddr().String()); got != want {
		t.Errorf("answer %q, want %q", got, want)
	}
}

func TestRunNeedsAListener(t *testing.T) {
	if err := Run(context.Background(), Config{}); err == nil {
		t.Error("Run without addresses: no error")
	}
}

// TestServeHTTPBytes: ?bytes=N pads the answer to N bytes, which Parse
// still reads; a bad size is a 400, never a huge allocation.
func TestServeHTTPBytes(t *testing.T) {
	c := Config{Pod: "p", Node: "n"}
	get := func(target string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, target, nil)
		req.RemoteAddr = "198.51.100.7:1000"
		c.ServeHTTP(rec, req)
		return rec
	}
	rec := get("/?bytes=1048576")
	if rec.Code != http.StatusOK || rec.Body.Len() != 1<<20 {
		t.Fatalf("code %d, %d bytes; want 200 and 1048576 bytes", rec.Code, rec.Body.Len())
	}
	said, err := Parse(rec.Body.String())
	if err != nil {
		t.Fatal(err)
	}
	if want := (Said{Pod: "p", Node: "n", Client: netip.MustParseAddrPort("198.51.100.7:1000")}); said != want {
		t.Errorf("Parse = %+v, want %+v", said, want)
	}
	if b := rec.Body.Bytes(); b[len(b)-1] != '\n' || b[len(b)-2] != '.' {
		t.Errorf("padding ends with %q", b[len(b)-2:])
	}
	if got := get("/?bytes=3").Body.String(); got != c.Answer("198.51.100.7:1000") {
		t.Errorf("a size below the answer's: %q", got)
	}
	for _, bad := range []string{"-1", "x", "67108865"} {
		if rec := get("/?bytes=" + bad); rec.Code != http.StatusBadRequest {
			t.Errorf("bytes=%s: code %d, want 400", bad, rec.Code)
		}
	}
}

func TestParse(t *testing.T) {
	c := Config{Pod: "echo-7", Node: "node-1"}
	said, err := Parse(c.Answer("[2001:db8::9]:4242"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Said{Pod: "echo-7", Node: "node-1", Client: netip.MustParseAddrPort("[2001:db8::9]:4242")}); said != want {
		t.Errorf("Parse = %+v, want %+v", said, want)
	}
	for _, bad := range []string{"", "hello from x (you are 1.2.3.4:5)\n", "hello from a on b (you are nowhere)\n"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q): no error", bad)
		}
	}
}

// TestLines: the greeting names the Pod and the client, then every line
// comes back prefixed with the Pod's name.
func TestLines(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	c := Config{Pod: "p-1", Node: "n"}
	go func() { _ = c.serveLines(ln, newHeld()) }()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if want := "p-1 " + conn.LocalAddr().String() + "\n"; line != want {
		t.Errorf("greeting %q, want %q", line, want)
	}
	for _, msg := range []string{"ping-1", "ping-2"} {
		if _, err := io.WriteString(conn, msg+"\n"); err != nil {
			t.Fatal(err)
		}
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if want := "p-1 " + msg + "\n"; line != want {
			t.Errorf("answer %q, want %q", line, want)
		}
	}
}

package echo

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
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
	go func() { _ = c.serveUDP(conn) }()
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

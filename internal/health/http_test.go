package health

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"
)

// loopbackTarget is the target of a test server on 127.0.0.1.
func loopbackTarget(t *testing.T, addr string) Target {
	t.Helper()
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return Target{Addr: ap.Addr(), Port: int32(ap.Port()), Path: "/healthz"}
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestCheckerHTTP runs the real prober and clock against servers on loopback.
func TestCheckerHTTP(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer ok.Close()
	var failing atomic.Bool
	var hits atomic.Int32
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if failing.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer flaky.Close()
	failing.Store(true)

	okT, flakyT := loopbackTarget(t, ok.Listener.Addr().String()), loopbackTarget(t, flaky.Listener.Addr().String())
	closedT := loopbackTarget(t, closedPort(t))
	var changes onChangeCounter
	// A timeout far above what a loopback answer takes: with 40 ms, a CI
	// run whose real-cluster tests kept both cores busy timed out both
	// probes of the 503 server before its handler ran (unhealthy after 0
	// probes), which is not what this test is about.
	c := NewChecker(Options{Interval: 500 * time.Millisecond, Timeout: 400 * time.Millisecond, FailureThreshold: 2, SuccessThreshold: 1}, changes.call)
	c.SetTargets([]Target{okT, flakyT, closedT})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	waitFor(t, func() bool { return c.State(flakyT) == Unhealthy && c.State(closedT) == Unhealthy })
	if n := hits.Load(); n < 1 {
		t.Errorf("503 target unhealthy after %d probes, want at least 1", n)
	}
	waitFor(t, func() bool { return c.State(okT) == Healthy })
	failing.Store(false)
	waitFor(t, func() bool { return c.State(flakyT) == Healthy })
	if c.State(closedT) != Unhealthy || c.State(okT) != Healthy {
		t.Errorf("closed port %v, 200 server %v; want unhealthy, healthy", c.State(closedT), c.State(okT))
	}
	waitFor(t, func() bool { changes.mu.Lock(); defer changes.mu.Unlock(); return changes.calls > 0 })
	changes.mu.Lock()
	defer changes.mu.Unlock()
	if changes.overlap {
		t.Error("onChange calls overlapped")
	}
}

// tcp is t as a TCP target.
func tcp(t Target) Target {
	t.TCP, t.Path = true, ""
	return t
}

func TestHTTPProberResults(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("/unavailable", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/healthz", http.StatusFound) })
	mux.HandleFunc("/slow", func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	var keepAlive atomic.Bool
	mux.HandleFunc("/keepalive", func(_ http.ResponseWriter, r *http.Request) { keepAlive.Store(!r.Close) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	base := loopbackTarget(t, srv.Listener.Addr().String())
	at := func(path string) Target { t := base; t.Path = path; return t }

	tests := []struct {
		name   string
		target Target
		want   string
		// notListening: the checker retries it on a new target.
		notListening bool
	}{
		{"200 is success", at("/healthz"), resultSuccess, false},
		{"503 is a bad status", at("/unavailable"), resultBadStatus, false},
		{"redirect is not followed", at("/redirect"), resultBadStatus, false},
		{"slow answer times out", at("/slow"), resultTimeout, false},
		{"closed port is an error", loopbackTarget(t, closedPort(t)), resultError, true},
		{"invalid target is an error", Target{}, resultError, false},
		{"TCP: an accepted connection is success", tcp(base), resultSuccess, false},
		{"TCP: a closed port is an error", tcp(loopbackTarget(t, closedPort(t))), resultError, true},
	}
	p := NewHTTPProber()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
			defer cancel()
			err := p.Probe(ctx, tt.target)
			if got := resultOf(err); got != tt.want {
				t.Errorf("Probe() = %v (%s), want %s", err, got, tt.want)
			}
			if got := notListening(err); got != tt.notListening {
				t.Errorf("notListening(%v) = %v, want %v", err, got, tt.notListening)
			}
		})
	}
	t.Run("no keep-alive", func(t *testing.T) {
		if err := p.Probe(t.Context(), at("/keepalive")); err != nil {
			t.Fatal(err)
		}
		if keepAlive.Load() {
			t.Error("probe asked to keep the connection alive")
		}
	})
}

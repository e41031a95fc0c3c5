package netlab

import (
	"os"
	"testing"
)

// NewT is New for tests. It skips the test under -short or when not root
// (namespaces need CAP_SYS_ADMIN); otherwise it deletes the labs of earlier
// runs that crashed (SweepStale(DefaultFamily)), creates a lab with a fresh
// prefix unless opts has one, and closes it when the test ends.
func NewT(t testing.TB, opts Options) *Lab {
	t.Helper()
	skipWithoutNamespaces(t)
	if err := SweepStale(DefaultFamily); err != nil {
		t.Logf("lab: sweeping earlier runs: %v", err)
	}
	l, err := New(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	})
	return l
}

// AddHostT is AddHost for tests: it fails the test on error.
func (l *Lab) AddHostT(t testing.TB, name string, opts HostOptions) *Host {
	t.Helper()
	h, err := l.AddHost(t.Context(), name, opts)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func skipWithoutNamespaces(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("lab: network namespaces are not used with -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("lab: network namespaces need root")
	}
}

package controlplane

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"testing"
)

func TestVerifyLoopback(t *testing.T) {
	tests := []struct {
		name   string
		ips    []net.IP
		dns    []string
		usable bool
	}{
		{name: "loopback IP", ips: []net.IP{net.IPv4(192, 0, 2, 1), net.IPv4(127, 0, 0, 1)}, usable: true},
		{name: "host IP and localhost only", ips: []net.IP{net.IPv4(192, 0, 2, 1)}, dns: []string{"localhost"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			caDER, certDER, _, err := newServingCert(tt.ips, tt.dns)
			if err != nil {
				t.Fatal(err)
			}
			// The layout the apiserver writes: leaf, then its CA.
			file := filepath.Join(t.TempDir(), "apiserver.crt")
			data := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certDER}),
				pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})...)
			if err := os.WriteFile(file, data, 0o600); err != nil {
				t.Fatal(err)
			}
			caPEM, err := selfSignedCA(file)
			if !tt.usable {
				if !errors.Is(err, errCertNotUsable) {
					t.Fatalf("selfSignedCA: %v, want errCertNotUsable", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("selfSignedCA: %v", err)
			}
			block, _ := pem.Decode(caPEM)
			if ca, err := x509.ParseCertificate(block.Bytes); err != nil || !ca.IsCA {
				t.Errorf("returned CA: %v, IsCA %v", err, ca != nil && ca.IsCA)
			}
		})
	}
}

// TestSelfSignedCANotYet checks that a missing or half-written file means
// "wait", not "fall back".
func TestSelfSignedCANotYet(t *testing.T) {
	dir := t.TempDir()
	if _, err := selfSignedCA(filepath.Join(dir, "none.crt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want ErrNotExist", err)
	}
	_, certDER, _, err := newServingCert([]net.IP{net.IPv4(127, 0, 0, 1)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	half := filepath.Join(dir, "half.crt")
	if err := os.WriteFile(half, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := selfSignedCA(half); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("leaf only: %v, want ErrNotExist", err)
	}
}

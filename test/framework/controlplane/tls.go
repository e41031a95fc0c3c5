package controlplane

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// errCertNotUsable marks a serving certificate that clients on 127.0.0.1
// cannot verify.
var errCertNotUsable = errors.New("serving certificate not usable on 127.0.0.1")

// selfSignedCA reads the certificate chain the apiserver generated into its
// --cert-dir (leaf first, then its CA) and returns the CA as PEM if the leaf
// verifies against it for 127.0.0.1. It returns fs.ErrNotExist (wrapped)
// while the file is not there yet or not complete.
func selfSignedCA(certFile string) ([]byte, error) {
	data, err := os.ReadFile(certFile)
	if err != nil {
		return nil, err
	}
	var certs []*x509.Certificate
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", certFile, err)
		}
		certs = append(certs, c)
	}
	if len(certs) < 2 {
		// Written but possibly not complete: let the caller retry.
		return nil, fmt.Errorf("%s holds %d certificates, want leaf and CA: %w", certFile, len(certs), os.ErrNotExist)
	}
	return verifyLoopback(certs[0], certs[1:])
}

// verifyLoopback returns the PEM of the CA among cas that makes leaf valid
// for clients of https://127.0.0.1.
func verifyLoopback(leaf *x509.Certificate, cas []*x509.Certificate) ([]byte, error) {
	var errs []error
	for _, ca := range cas {
		if !ca.IsCA {
			continue
		}
		roots := x509.NewCertPool()
		roots.AddCert(ca)
		_, err := leaf.Verify(x509.VerifyOptions{
			Roots:     roots,
			DNSName:   "127.0.0.1",
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		})
		if err == nil {
			return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}), nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		errs = append(errs, errors.New("no CA certificate in chain"))
	}
	return nil, fmt.Errorf("%w: %w", errCertNotUsable, errors.Join(errs...))
}

// servingFiles are the CA, certificate and key of our own serving
// certificate, used when the apiserver's self-signed one does not verify.
type servingFiles struct {
	caPEM    []byte
	certFile string
	keyFile  string
}

// writeServingCert makes a CA and a serving certificate for ips, localhost
// and the kubernetes Service's names in dir.
func writeServingCert(dir string, ips []net.IP) (servingFiles, error) {
	caDER, certDER, keyDER, err := newServingCert(ips,
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"})
	if err != nil {
		return servingFiles{}, err
	}
	f := servingFiles{
		caPEM:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		certFile: filepath.Join(dir, "serving.crt"),
		keyFile:  filepath.Join(dir, "serving.key"),
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return servingFiles{}, fmt.Errorf("write serving certificate: %w", err)
	}
	if err := os.WriteFile(f.certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certDER}), 0o600); err != nil {
		return servingFiles{}, fmt.Errorf("write serving certificate: %w", err)
	}
	if err := os.WriteFile(f.keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return servingFiles{}, fmt.Errorf("write serving key: %w", err)
	}
	return f, nil
}

// newServingCert returns a new CA and a serving certificate and key it
// signed for ips and names, all DER.
func newServingCert(ips []net.IP, names []string) (caDER, certDER, keyDER []byte, err error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("generate CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "groundcloud-testbed-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err = x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("create CA certificate: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("generate serving key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  ips,
		DNSNames:     names,
	}
	certDER, err = x509.CreateCertificate(rand.Reader, tmpl, caTmpl, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("create serving certificate: %w", err)
	}
	keyDER, err = x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("marshal serving key: %w", err)
	}
	return caDER, certDER, keyDER, nil
}

// servingIPs are the addresses clients reach the apiserver at, as its own
// self-signed certificate lists them: 127.0.0.1, the --advertise-address
// (where Pods and nodes reach it) and the kubernetes Service's cluster IP
// (the first of each service CIDR).
func (cp *ControlPlane) servingIPs() []net.IP {
	ips := []net.IP{net.IPv4(127, 0, 0, 1)}
	for _, arg := range cp.opts.ExtraAPIServerArgs {
		if v, ok := strings.CutPrefix(arg, "--advertise-address="); ok {
			if ip := net.ParseIP(v); ip != nil {
				ips = append(ips, ip)
			}
		}
	}
	for _, cidr := range strings.Split(cp.opts.ServiceCIDR, ",") {
		if p, err := netip.ParsePrefix(cidr); err == nil {
			ips = append(ips, net.IP(p.Masked().Addr().Next().AsSlice()))
		}
	}
	return ips
}

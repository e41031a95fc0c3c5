package redfish

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// fakeSystem is one entry of SUSHY_EMULATOR_FAKE_SYSTEMS (sushy-tools'
// fakedriver).
type fakeSystem struct {
	UUID       string   `json:"uuid"`
	Name       string   `json:"name"`
	PowerState string   `json:"power_state"`
	NICs       []string `json:"nics"`
	// Served by the vendored emulator's patch; absent: not served.
	Model        string `json:"model,omitempty"`
	SerialNumber string `json:"serial_number,omitempty"`
	BIOSVersion  string `json:"bios_version,omitempty"`
}

// writeFiles writes the emulator's configuration (a Python file, as
// upstream reads it: SUSHY_EMULATOR_CONFIG), its htpasswd file and its
// certificates into e.dir and sets e.URL and e.CAFile; it returns the
// configuration's path.
func (e *Emulator) writeFiles() (string, error) {
	state := filepath.Join(e.dir, "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		return "", err
	}
	systems := make([]fakeSystem, 0, len(e.opts.Systems))
	for _, s := range e.opts.Systems {
		power := "Off"
		if s.On {
			power = "On"
		}
		systems = append(systems, fakeSystem{UUID: s.ID, Name: s.Name, PowerState: power, NICs: []string{},
			Model: s.Model, SerialNumber: s.SerialNumber, BIOSVersion: s.BIOSVersion})
	}
	var conf strings.Builder
	conf.WriteString("# written by test/framework/redfish\nSUSHY_EMULATOR_FAKE_DRIVER = True\n")
	// JSON strings, lists and objects are Python literals too.
	set := func(key string, v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(&conf, "%s = %s\n", key, b)
	}
	set("SUSHY_EMULATOR_STATE_DIR", state)
	set("SUSHY_EMULATOR_FAKE_SYSTEMS", systems)
	if e.opts.Username != "" {
		auth, err := e.writeHtpasswd()
		if err != nil {
			return "", err
		}
		set("SUSHY_EMULATOR_AUTH_FILE", auth)
	}
	scheme := "http"
	if e.opts.TLS {
		cert, key, err := e.writeCertificates()
		if err != nil {
			return "", err
		}
		set("SUSHY_EMULATOR_SSL_CERT", cert)
		set("SUSHY_EMULATOR_SSL_KEY", key)
		scheme = "https"
	}
	e.URL = scheme + "://" + e.Addr().String()
	path := filepath.Join(e.dir, "emulator.conf")
	return path, os.WriteFile(path, []byte(conf.String()), 0o600)
}

func (e *Emulator) writeHtpasswd() (string, error) {
	if strings.ContainsAny(e.opts.Username, ":\n") {
		return "", errors.New("user name holds ':' or a newline")
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(e.opts.Password), bcrypt.MinCost)
	if err != nil {
		return "", err
	}
	path := filepath.Join(e.dir, "htpasswd")
	return path, os.WriteFile(path, []byte(e.opts.Username+":"+string(hash)+"\n"), 0o600)
}

// writeCertificates makes an authority and a server certificate for the
// host's address, both valid for a day, and writes the authority's
// certificate (CAFile), the server's certificate and its key.
func (e *Emulator) writeCertificates() (cert, key string, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "groundcloud test BMC authority"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return "", "", err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return "", "", err
	}
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	srv := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: e.Host.Name},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IP(e.Host.Addr4.AsSlice())},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srv, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		return "", "", err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(srvKey)
	if err != nil {
		return "", "", err
	}
	e.CAFile = filepath.Join(e.dir, "ca.pem")
	cert, key = filepath.Join(e.dir, "server.pem"), filepath.Join(e.dir, "server-key.pem")
	for _, f := range []struct {
		path, kind string
		der        []byte
	}{{e.CAFile, "CERTIFICATE", caDER}, {cert, "CERTIFICATE", srvDER}, {key, "PRIVATE KEY", keyDER}} {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(&pem.Block{Type: f.kind, Bytes: f.der}), 0o600); err != nil {
			return "", "", err
		}
	}
	return cert, key, nil
}

// tlsConfig trusts the authority in caFile only.
func tlsConfig(caFile string) (*tls.Config, error) {
	pemBytes, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		return nil, fmt.Errorf("%s holds no certificate", caFile)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

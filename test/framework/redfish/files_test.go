package redfish

import (
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

// The files the emulator is started with: its configuration names every
// system with its power, the htpasswd file holds a bcrypt hash of the
// password (never the password), and the server certificate is for the
// host's address, signed by the authority in CAFile.
func TestWriteFiles(t *testing.T) {
	dir := t.TempDir()
	e := &Emulator{
		Host: &netlab.Host{Name: "bmc", Addr4: netip.MustParseAddr("192.0.2.7")},
		opts: Options{Systems: []System{{ID: "u-1", Name: "node-1", On: true}, {ID: "u-2", Name: "node-2"}},
			Port: DefaultPort, Username: "admin", Password: "s3cret", TLS: true},
		dir: dir,
	}
	conf, err := e.writeFiles()
	if err != nil {
		t.Fatal(err)
	}
	if e.URL != "https://192.0.2.7:8000" {
		t.Errorf("URL %s", e.URL)
	}
	c := readFile(t, conf)
	for _, want := range []string{
		"SUSHY_EMULATOR_FAKE_DRIVER = True\n",
		`{"uuid":"u-1","name":"node-1","power_state":"On","nics":[]}`,
		`{"uuid":"u-2","name":"node-2","power_state":"Off","nics":[]}`,
		`SUSHY_EMULATOR_AUTH_FILE = "` + filepath.Join(dir, "htpasswd") + `"`,
		`SUSHY_EMULATOR_SSL_CERT = "` + filepath.Join(dir, "server.pem") + `"`,
		`SUSHY_EMULATOR_STATE_DIR = "` + filepath.Join(dir, "state") + `"`,
	} {
		if !strings.Contains(c, want) {
			t.Errorf("configuration lacks %s:\n%s", want, c)
		}
	}
	user, hash, _ := strings.Cut(strings.TrimSpace(readFile(t, filepath.Join(dir, "htpasswd"))), ":")
	if user != "admin" || strings.Contains(hash, "s3cret") || bcrypt.CompareHashAndPassword([]byte(hash), []byte("s3cret")) != nil {
		t.Errorf("htpasswd entry %s:%s is not a bcrypt hash of the password", user, hash)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(readFile(t, e.CAFile))) {
		t.Fatal("CAFile holds no certificate")
	}
	block, _ := pem.Decode([]byte(readFile(t, filepath.Join(dir, "server.pem"))))
	if block == nil {
		t.Fatal("server.pem holds no PEM block")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "192.0.2.7"}); err != nil {
		t.Errorf("server certificate for 192.0.2.7: %v", err)
	}
	if err := cert.VerifyHostname(net.IPv4(192, 0, 2, 8).String()); err == nil {
		t.Error("server certificate is valid for another address")
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

package bmc

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/groundcloud/groundcloud/internal/config"
)

// fakeRedfish is the least of a Redfish service that Query reads: the
// service root, the systems collection and its systems, behind basic
// authentication (admin/secret) except for the service root, as BMCs do.
func fakeRedfish(t *testing.T, systems []string, delay time.Duration) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/redfish/v1/", func(w http.ResponseWriter, r *http.Request) {
		path := strings.TrimSuffix(r.URL.Path, "/")
		if path != "/redfish/v1" {
			if u, p, ok := r.BasicAuth(); !ok || u != "admin" || p != "secret" {
				w.WriteHeader(http.StatusUnauthorized)
				fmt.Fprint(w, `{"error":{"code":"Base.1.0.GeneralError","message":"unauthorized"}}`)
				return
			}
		}
		time.Sleep(delay)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case path == "/redfish/v1":
			fmt.Fprint(w, `{"@odata.id":"/redfish/v1/","Id":"RootService","RedfishVersion":"1.6.0","Systems":{"@odata.id":"/redfish/v1/Systems"}}`)
		case path == "/redfish/v1/Systems":
			var members []string
			for _, s := range systems {
				members = append(members, fmt.Sprintf(`{"@odata.id":"/redfish/v1/Systems/%s"}`, s))
			}
			fmt.Fprintf(w, `{"@odata.id":"/redfish/v1/Systems","Members":[%s],"Members@odata.count":%d}`, strings.Join(members, ","), len(members))
		case strings.HasPrefix(path, "/redfish/v1/Systems/"):
			id := strings.TrimPrefix(path, "/redfish/v1/Systems/")
			fmt.Fprintf(w, `{"@odata.id":%q,"Id":%q,"PowerState":"Off","Model":"M-%s","SerialNumber":"S-%s","BiosVersion":"B-%s"}`, path, id, id, id, id)
		default:
			http.NotFound(w, r)
		}
	})
	ts := httptest.NewTLSServer(mux)
	t.Cleanup(ts.Close)
	return ts
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func caFileOf(t *testing.T, ts *httptest.Server) string {
	return writeFile(t, "ca.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw})))
}

// otherAuthority is the PEM file of an authority that signed nothing.
func otherAuthority(t *testing.T) string {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "another authority"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, "other-ca.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
}

func TestRedfishQuery(t *testing.T) {
	one := fakeRedfish(t, []string{"1"}, 0)
	two := fakeRedfish(t, []string{"1", "2"}, 0)
	slow := fakeRedfish(t, []string{"1"}, 2*time.Second)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedURL := "https://" + closed.Addr().String()
	closed.Close()
	user, pass := writeFile(t, "user", "admin\n"), writeFile(t, "pass", "secret\n")
	wrongPass := writeFile(t, "wrong", "guess\n")
	bmc := func(ts *httptest.Server, system string, mods ...func(*config.BMC)) *config.BMC {
		b := &config.BMC{URL: ts.URL, System: system, UsernameFile: user, PasswordFile: pass,
			CAFile: caFileOf(t, ts), Timeout: time.Second, PollInterval: time.Second}
		for _, m := range mods {
			m(b)
		}
		return b
	}
	tests := []struct {
		name       string
		bmc        *config.BMC
		want       Answer
		wantReason string
	}{
		{name: "the only system", bmc: bmc(one, ""), want: Answer{PowerState: "Off", Model: "M-1", SerialNumber: "S-1", BIOSVersion: "B-1"}},
		{name: "a system by Id", bmc: bmc(two, "2"), want: Answer{PowerState: "Off", Model: "M-2", SerialNumber: "S-2", BIOSVersion: "B-2"}},
		{name: "a system by @odata.id", bmc: bmc(two, "/redfish/v1/Systems/1"), want: Answer{PowerState: "Off", Model: "M-1", SerialNumber: "S-1", BIOSVersion: "B-1"}},
		{name: "several systems and no bmc-system", bmc: bmc(two, ""), wantReason: ReasonNoSystem},
		{name: "an Id the service does not have", bmc: bmc(two, "3"), wantReason: ReasonNoSystem},
		{name: "wrong password", bmc: bmc(one, "", func(b *config.BMC) { b.PasswordFile = wrongPass }), wantReason: ReasonUnauthorized},
		{name: "no credentials", bmc: bmc(one, "", func(b *config.BMC) { b.UsernameFile, b.PasswordFile = "", "" }), wantReason: ReasonUnauthorized},
		{name: "a password file that is not there", bmc: bmc(one, "", func(b *config.BMC) { b.PasswordFile = "/nonexistent/pass" }), wantReason: ReasonFiles},
		{name: "a certificate of another authority", bmc: bmc(one, "", func(b *config.BMC) { b.CAFile = otherAuthority(t) }), wantReason: ReasonTLS},
		{name: "another authority, verification skipped", bmc: bmc(one, "", func(b *config.BMC) { b.CAFile, b.InsecureSkipVerify = "", true }),
			want: Answer{PowerState: "Off", Model: "M-1", SerialNumber: "S-1", BIOSVersion: "B-1"}},
		{name: "slower than the timeout", bmc: bmc(slow, ""), wantReason: ReasonTimeout},
		{name: "nothing listens", bmc: bmc(one, "", func(b *config.BMC) { b.URL = closedURL }), wantReason: ReasonUnreachable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), tt.bmc.Timeout)
			defer cancel()
			got, err := Redfish{}.Query(ctx, tt.bmc)
			if tt.wantReason != "" {
				if err == nil {
					t.Fatalf("Query answered %+v, want an error of reason %s", got, tt.wantReason)
				}
				if r := Reason(err); r != tt.wantReason {
					t.Errorf("Reason(%v) = %s, want %s", err, r, tt.wantReason)
				}
				if strings.Contains(err.Error(), "secret") {
					t.Errorf("the error shows the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("Query = %+v, want %+v", got, tt.want)
			}
		})
	}
}

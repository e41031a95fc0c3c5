package nodesim

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestHealth(t *testing.T) {
	tests := []struct {
		name  string
		files []string // health files present
		// want status and body start per endpoint
		kubeProxy, svc32000, svc32001 string
	}{
		{
			name:      "healthy",
			kubeProxy: `200 {"lastUpdated":`,
			svc32000:  `200 {"localEndpoints":1,"serviceProxyHealthy":true}`,
			svc32001:  `200 {"localEndpoints":1,"serviceProxyHealthy":true}`,
		},
		{
			name:      "one service port down",
			files:     []string{"n1.32000.unhealthy"},
			kubeProxy: `200 {"lastUpdated":`,
			svc32000:  `503 {"localEndpoints":0,"serviceProxyHealthy":true}`,
			svc32001:  `200 {"localEndpoints":1,"serviceProxyHealthy":true}`,
		},
		{
			name:      "kube-proxy port down",
			files:     []string{"n1.10256.unhealthy"},
			kubeProxy: `503 {"lastUpdated":`,
			svc32000:  `200 {"localEndpoints":1,"serviceProxyHealthy":true}`,
			svc32001:  `200 {"localEndpoints":1,"serviceProxyHealthy":true}`,
		},
		{
			name:      "node down",
			files:     []string{"n1.unhealthy"},
			kubeProxy: `503 {"lastUpdated":`,
			svc32000:  `503 {"localEndpoints":1,"serviceProxyHealthy":false}`,
			svc32001:  `503 {"localEndpoints":1,"serviceProxyHealthy":false}`,
		},
		{
			name:      "files of other nodes do not count",
			files:     []string{"n2.unhealthy", "n2.32000.unhealthy", "n10.unhealthy"},
			kubeProxy: `200 {"lastUpdated":`,
			svc32000:  `200 {"localEndpoints":1,"serviceProxyHealthy":true}`,
			svc32001:  `200 {"localEndpoints":1,"serviceProxyHealthy":true}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			h := health{stateDir: dir, name: "n1"}
			for _, c := range []struct {
				handler http.Handler
				path    string
				want    string
			}{
				{h.kubeProxyHealthz(10256), "/healthz", tt.kubeProxy},
				{h.serviceHealth(32000), "/healthz", tt.svc32000},
				{h.serviceHealth(32001), "/any/path", tt.svc32001},
			} {
				rec := httptest.NewRecorder()
				c.handler.ServeHTTP(rec, httptest.NewRequest("GET", c.path, nil))
				got := rec.Result().Status[:3] + " " + rec.Body.String()
				if !strings.HasPrefix(got, c.want) {
					t.Errorf("GET %s = %q, want it to start %q", c.path, got, c.want)
				}
				if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
					t.Errorf("GET %s: Content-Type %q", c.path, ct)
				}
			}
		})
	}

	t.Run("kube-proxy serves only its paths", func(t *testing.T) {
		rec := httptest.NewRecorder()
		health{}.kubeProxyHealthz(10256).ServeHTTP(rec, httptest.NewRequest("GET", "/other", nil))
		if rec.Code != http.StatusNotFound {
			t.Errorf("GET /other = %d, want 404", rec.Code)
		}
	})
}

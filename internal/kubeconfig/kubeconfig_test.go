package kubeconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRESTConfig(t *testing.T) {
	dir := t.TempDir()
	path, token := filepath.Join(dir, "kubeconfig"), filepath.Join(dir, "agent.token")
	if err := os.WriteFile(token, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://192.0.2.10:6443"}}]
users: [{name: u, user: {tokenFile: ` + token + `}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := RESTConfig(path, "groundcloud-agent")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://192.0.2.10:6443" || cfg.BearerTokenFile != token || cfg.UserAgent != "groundcloud-agent" {
		t.Errorf("host %q, token file %q, user agent %q", cfg.Host, cfg.BearerTokenFile, cfg.UserAgent)
	}

	if _, err := RESTConfig(filepath.Join(t.TempDir(), "missing"), "x"); err == nil || !strings.Contains(err.Error(), "--kubeconfig") {
		t.Errorf("missing file: %v, want an error naming --kubeconfig", err)
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if _, err := RESTConfig("", "x"); err == nil || !strings.Contains(err.Error(), "not in a cluster") {
		t.Errorf("no path outside a cluster: %v", err)
	}
}

package nodesim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// health reads the health files of one node; each check looks afresh.
type health struct {
	stateDir, name string
}

// nodeHealthy is false while "<name>.unhealthy" exists.
func (h health) nodeHealthy() bool {
	return h.stateDir == "" || !exists(filepath.Join(h.stateDir, h.name+".unhealthy"))
}

// portHealthy is false while "<name>.<port>.unhealthy" exists.
func (h health) portHealthy(port uint16) bool {
	return h.stateDir == "" || !exists(filepath.Join(h.stateDir, fmt.Sprintf("%s.%d.unhealthy", h.name, port)))
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// kubeProxyHealthz answers GET /healthz (and /livez) like kube-proxy's
// healthz server: 200 while healthy, 503 otherwise, with a small JSON body.
func (h health) kubeProxyHealthz(port uint16) http.Handler {
	started := time.Now()
	handler := func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		status, lastUpdated := http.StatusOK, now
		if !h.nodeHealthy() || !h.portHealthy(port) {
			status, lastUpdated = http.StatusServiceUnavailable, started
		}
		writeJSON(w, status, struct {
			LastUpdated  string `json:"lastUpdated"`
			CurrentTime  string `json:"currentTime"`
			NodeEligible bool   `json:"nodeEligible"`
		}{lastUpdated.UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339Nano), true})
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", handler)
	mux.HandleFunc("GET /livez", handler)
	return mux
}

// serviceHealth answers any request like kube-proxy answers on the
// healthCheckNodePort of a Service with one local endpoint: 200
// {"localEndpoints":1,"serviceProxyHealthy":true}. The node's file makes
// the proxy unhealthy, the port's file takes the endpoint away; either
// answers 503.
func (h health) serviceHealth(port uint16) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		endpoints, proxyHealthy := 1, h.nodeHealthy()
		if !h.portHealthy(port) {
			endpoints = 0
		}
		status := http.StatusOK
		if endpoints == 0 || !proxyHealthy {
			status = http.StatusServiceUnavailable
		}
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("X-Load-Balancing-Endpoint-Weight", strconv.Itoa(endpoints))
		writeJSON(w, status, struct {
			LocalEndpoints      int  `json:"localEndpoints"`
			ServiceProxyHealthy bool `json:"serviceProxyHealthy"`
		}{endpoints, proxyHealthy})
	})
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	b, _ := json.Marshal(body) // plain structs cannot fail
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

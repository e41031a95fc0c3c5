package controlplane

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// serviceAccountIssuer is --service-account-issuer.
const serviceAccountIssuer = "https://kubernetes.default.svc.cluster.local"

// StopAPIServer stops the apiserver (etcd keeps running), to simulate an
// outage. It reports a crash if the apiserver had exited on its own.
func (cp *ControlPlane) StopAPIServer() error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.stopped {
		return errStopped
	}
	p := cp.apiserver
	cp.apiserver = nil
	return cp.stopProcess(p)
}

// StartAPIServer starts the apiserver again on the same port, with the same
// etcd and credentials, and waits until it is ready. It does nothing if the
// apiserver runs.
func (cp *ControlPlane) StartAPIServer(ctx context.Context) error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.stopped {
		return errStopped
	}
	if cp.apiserver != nil {
		return nil
	}
	return cp.startAPIServer(ctx, false)
}

// startAPIServer starts the apiserver and waits for it; cp.mu is held. On the
// first start it picks the port (again, if it was taken meanwhile) and falls
// back to a serving certificate of its own if the generated one does not
// verify for 127.0.0.1.
func (cp *ControlPlane) startAPIServer(ctx context.Context, first bool) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	began := time.Now()
	for attempt := 1; ; attempt++ {
		if cp.port == 0 {
			port, err := freePort()
			if err != nil {
				return err
			}
			cp.port = port
			cp.URL = "https://127.0.0.1:" + strconv.Itoa(port)
		}
		p, err := startProcess("kube-apiserver", filepath.Join(cp.BinDir, "kube-apiserver"), cp.apiserverArgs(), cp.path(apiserverLogName), cp.opts.Started)
		if err != nil {
			return err
		}
		cp.apiserver = p
		err = cp.waitAPIServer(ctx, p)
		if err == nil {
			cp.opts.Logf("testbed: kube-apiserver ready at %s in %v", cp.URL, time.Since(began).Round(time.Millisecond))
			return nil
		}
		cp.apiserver = nil
		p.stop(stopGrace)
		switch {
		case first && errors.Is(err, errCertNotUsable) && cp.serving == nil:
			cp.opts.Logf("testbed: using a serving certificate of our own: %v", err)
			serving, err := writeServingCert(cp.path("pki"), cp.servingIPs())
			if err != nil {
				return err
			}
			cp.serving, cp.caPEM = &serving, serving.caPEM
		case first && errors.Is(err, errAddrInUse) && attempt < portAttempts:
			cp.opts.Logf("testbed: kube-apiserver lost its port, retrying: %v", err)
			cp.port = 0
		default:
			return err
		}
	}
}

func (cp *ControlPlane) apiserverArgs() []string {
	defaults := []string{
		"--etcd-servers=" + cp.EtcdURL,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(cp.port),
		"--cert-dir=" + cp.path("apiserver-certs"),
		"--token-auth-file=" + cp.path(tokenFileName),
		"--service-account-key-file=" + cp.path(serviceAccountKeyName),
		"--service-account-signing-key-file=" + cp.path(serviceAccountKeyName),
		"--service-account-issuer=" + serviceAccountIssuer,
		// As a cluster should run: a kubelet (system:node:<name>) may change
		// only its own Node, and not the labels under
		// node-restriction.kubernetes.io/ that place the agent, nor its taints.
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--service-cluster-ip-range=" + cp.opts.ServiceCIDR,
	}
	if cp.serving != nil {
		defaults = append(defaults, "--tls-cert-file="+cp.serving.certFile, "--tls-private-key-file="+cp.serving.keyFile)
	}
	return mergeArgs(defaults, cp.opts.ExtraAPIServerArgs)
}

// mergeArgs returns defaults without the flags extra sets, then extra. A
// repeated slice flag would append rather than replace, hence no duplicates.
func mergeArgs(defaults, extra []string) []string {
	set := map[string]bool{}
	for _, arg := range extra {
		name, _, _ := strings.Cut(arg, "=")
		set[name] = true
	}
	var args []string
	for _, arg := range defaults {
		if name, _, _ := strings.Cut(arg, "="); !set[name] {
			args = append(args, arg)
		}
	}
	return append(args, extra...)
}

// waitAPIServer waits until the apiserver's certificate is known, /readyz
// answers 200 to the admin and namespace default exists.
func (cp *ControlPlane) waitAPIServer(ctx context.Context, p *process) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var client *http.Client
	lastProbe := errors.New("no probe yet")
	for {
		if err := p.exitError(); err != nil {
			return err
		}
		if cp.caPEM == nil {
			ca, err := selfSignedCA(cp.path("apiserver-certs/apiserver.crt"))
			switch {
			case err == nil:
				cp.caPEM = ca
			case !errors.Is(err, fs.ErrNotExist):
				return err
			}
		}
		if cp.caPEM != nil && client == nil {
			client = probeClient(cp.caPEM)
			defer client.CloseIdleConnections()
		}
		if client != nil {
			if lastProbe = cp.probe(ctx, client); lastProbe == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube-apiserver not ready: %w; last probe: %w; log %s ends:\n%s",
				context.Cause(ctx), lastProbe, p.logPath, tailLines(p.output(), 40))
		case <-tick.C:
		}
	}
}

func probeClient(caPEM []byte) *http.Client {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	return &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}},
	}
}

// probe checks /readyz and namespace default as the admin.
func (cp *ControlPlane) probe(ctx context.Context, client *http.Client) error {
	for _, path := range []string{"/readyz?verbose", "/api/v1/namespaces/default"} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, cp.URL+path, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+cp.tokens[AdminUser])
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s: %s", path, resp.Status, failedChecks(body))
		}
	}
	return nil
}

// failedChecks keeps the "[-]" lines of a verbose /readyz answer, or the
// whole body when there are none.
func failedChecks(body []byte) string {
	var failed []string
	for line := range strings.Lines(string(body)) {
		if strings.HasPrefix(line, "[-]") {
			failed = append(failed, strings.TrimSpace(line))
		}
	}
	if len(failed) == 0 {
		return string(bytes.TrimSpace(body))
	}
	return strings.Join(failed, "; ")
}

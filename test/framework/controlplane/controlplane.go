package controlplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// startTimeout bounds each component's start when ctx has no earlier
// deadline.
const startTimeout = 60 * time.Second

// errStopped is returned by methods called after Stop.
var errStopped = errors.New("control plane stopped")

// ControlPlane is an etcd and a kube-apiserver running as child processes
// on 127.0.0.1. Its exported fields are read-only.
type ControlPlane struct {
	// URL is the apiserver's https://127.0.0.1:<port>; it stays the same
	// across StopAPIServer and StartAPIServer.
	URL string
	// EtcdURL is etcd's client URL.
	EtcdURL string
	// Dir is the work directory: logs (etcd.log, kube-apiserver.log), etcd
	// data, certificates, keys, the token file and kubeconfigs.
	Dir string
	// AdminKubeconfig is <Dir>/admin.kubeconfig, for AdminUser.
	AdminKubeconfig string
	// BinDir holds the kube-apiserver, kubectl and etcd that run.
	BinDir string

	opts      Options
	removeDir bool
	port      int
	tokens    map[string]string
	caPEM     []byte        // verifies the serving certificate
	serving   *servingFiles // ours, if the apiserver's own one did not verify

	mu                sync.Mutex // guards the fields below
	etcd              *process
	apiserver         *process
	controllerManager *process
	scheduler         *process
	stopped           bool
}

// Start runs etcd and kube-apiserver and returns once the apiserver is ready
// and namespace default exists (2-4 s on 2 busy cores). ctx bounds the
// start only; the processes run until Stop. On error nothing is left running
// and a temp work directory is removed; the error carries the failing log's
// tail.
func Start(ctx context.Context, opts Options) (_ *ControlPlane, err error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("testbed options: %w", err)
	}
	began := time.Now()
	cp, err := prepare(opts.withDefaults())
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, cp.Stop())
		}
	}()
	if err := cp.startEtcd(ctx); err != nil {
		return nil, err
	}
	cp.mu.Lock()
	err = cp.startAPIServer(ctx, true)
	cp.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if err := writeKubeconfig(cp.AdminKubeconfig, cp.URL, cp.caPEM, AdminUser, cp.tokens[AdminUser]); err != nil {
		return nil, err
	}
	if err := cp.startComponents(); err != nil {
		return nil, err
	}
	cp.opts.Logf("testbed: control plane ready at %s in %v (dir %s)", cp.URL, time.Since(began).Round(time.Millisecond), cp.Dir)
	return cp, nil
}

// prepare makes the work directory and the credentials in it.
func prepare(opts Options) (*ControlPlane, error) {
	cp := &ControlPlane{Dir: opts.Dir, BinDir: opts.BinDir, opts: opts}
	if cp.Dir == "" {
		dir, err := os.MkdirTemp("", "groundcloud-testbed-")
		if err != nil {
			return nil, fmt.Errorf("make work dir: %w", err)
		}
		cp.Dir, cp.removeDir = dir, true
	} else if err := os.MkdirAll(cp.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("make work dir: %w", err)
	}
	cp.AdminKubeconfig = filepath.Join(cp.Dir, "admin.kubeconfig")
	err := cp.writeCredentials()
	if err == nil && opts.ownServingCert {
		var serving servingFiles
		serving, err = writeServingCert(cp.path("pki"), cp.servingIPs())
		cp.serving, cp.caPEM = &serving, serving.caPEM
	}
	if err != nil && cp.removeDir {
		err = errors.Join(err, os.RemoveAll(cp.Dir))
	}
	return cp, err
}

func (cp *ControlPlane) writeCredentials() error {
	tokens, err := newTokens(cp.opts.Users)
	if err != nil {
		return err
	}
	cp.tokens = tokens
	if err := os.WriteFile(cp.path(tokenFileName), tokenFile(cp.opts.Users, tokens), 0o600); err != nil {
		return fmt.Errorf("write token file: %w", err)
	}
	return writeServiceAccountKey(cp.path(serviceAccountKeyName))
}

func (cp *ControlPlane) path(name string) string { return filepath.Join(cp.Dir, name) }

// Stop stops the apiserver, then etcd (SIGTERM to each process group,
// SIGKILL after a few seconds), and removes the work directory if Start made
// it. It reports a component that had exited on its own. Later calls do
// nothing.
func (cp *ControlPlane) Stop() error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.stopped {
		return nil
	}
	cp.stopped = true
	var errs []error
	for _, p := range []**process{&cp.controllerManager, &cp.scheduler, &cp.apiserver, &cp.etcd} {
		errs = append(errs, cp.stopProcess(*p))
		*p = nil
	}
	if cp.removeDir {
		if err := os.RemoveAll(cp.Dir); err != nil {
			errs = append(errs, fmt.Errorf("remove work dir: %w", err))
		}
	}
	return errors.Join(errs...)
}

func (cp *ControlPlane) stopProcess(p *process) error {
	if p == nil {
		return nil
	}
	killed, exitedEarly := p.stop(stopGrace)
	if killed {
		cp.opts.Logf("testbed: %s (pid %d) ignored SIGTERM for %v; killed", p.name, p.pid(), stopGrace)
	}
	return exitedEarly
}

// RESTConfig returns a client config for AdminUser.
func (cp *ControlPlane) RESTConfig() *rest.Config {
	return restConfig(cp.URL, cp.caPEM, cp.tokens[AdminUser])
}

// RESTConfigFor returns a client config for one of Options.Users.
func (cp *ControlPlane) RESTConfigFor(user string) (*rest.Config, error) {
	token, ok := cp.tokens[user]
	if !ok {
		return nil, fmt.Errorf("no testbed user %q", user)
	}
	return restConfig(cp.URL, cp.caPEM, token), nil
}

// Client returns a clientset for AdminUser.
func (cp *ControlPlane) Client() kubernetes.Interface {
	// Only a malformed config makes NewForConfig fail, and ours is not.
	return kubernetes.NewForConfigOrDie(cp.RESTConfig())
}

// Kubeconfig writes <Dir>/<user>.kubeconfig for one of Options.Users (or
// AdminUser) and returns its path.
func (cp *ControlPlane) Kubeconfig(user string) (string, error) {
	if user == AdminUser {
		return cp.AdminKubeconfig, nil
	}
	token, ok := cp.tokens[user]
	if !ok {
		return "", fmt.Errorf("no testbed user %q", user)
	}
	path := cp.path(user + ".kubeconfig")
	if err := writeKubeconfig(path, cp.URL, cp.caPEM, user, token); err != nil {
		return "", err
	}
	return path, nil
}

// Kubectl runs the built kubectl as AdminUser, with its cache in Dir, and
// returns its stdout; a failure's error carries stderr.
func (cp *ControlPlane) Kubectl(ctx context.Context, args ...string) ([]byte, error) {
	full := append([]string{"--kubeconfig=" + cp.AdminKubeconfig, "--cache-dir=" + cp.path("kubectl-cache")}, args...)
	cmd := exec.CommandContext(ctx, filepath.Join(cp.BinDir, "kubectl"), full...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("kubectl %v: %w: %s", args, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.Bytes(), nil
}

// Logs returns the paths of the components' log files.
func (cp *ControlPlane) Logs() []string {
	logs := []string{cp.path(etcdLogName), cp.path(apiserverLogName)}
	if cp.opts.ControllerManager != nil {
		logs = append(logs, cp.path(controllerLogName))
	}
	if cp.opts.Scheduler {
		logs = append(logs, cp.path(schedulerLogName))
	}
	return logs
}

// pids returns the process ids of the running children.
func (cp *ControlPlane) pids() []int {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	var pids []int
	for _, p := range []*process{cp.etcd, cp.apiserver, cp.controllerManager, cp.scheduler} {
		if p != nil {
			pids = append(pids, p.pid())
		}
	}
	return pids
}

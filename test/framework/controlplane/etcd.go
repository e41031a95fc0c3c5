package controlplane

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// File names in the work directory.
const (
	etcdLogName           = "etcd.log"
	apiserverLogName      = "kube-apiserver.log"
	tokenFileName         = "tokens.csv"
	serviceAccountKeyName = "service-account.key"
)

// portAttempts is how often a start is tried with fresh ports when the
// picked ones were taken in the meantime.
const portAttempts = 3

// etcdReadyLine is what hack/tools/cmd/etcd prints to stderr once it serves.
const etcdReadyLine = "etcd: ready on"

func (cp *ControlPlane) startEtcd(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	began := time.Now()
	for attempt := 1; ; attempt++ {
		clientPort, err := freePort()
		if err != nil {
			return err
		}
		peerPort, err := freePort()
		if err != nil {
			return err
		}
		url := "http://127.0.0.1:" + strconv.Itoa(clientPort)
		p, err := startProcess("etcd", filepath.Join(cp.BinDir, "etcd"), []string{
			"--data-dir=" + cp.path("etcd-data"),
			"--listen-client-url=" + url,
			"--listen-peer-url=http://127.0.0.1:" + strconv.Itoa(peerPort),
		}, cp.path(etcdLogName), cp.opts.Started)
		if err != nil {
			return err
		}
		cp.mu.Lock()
		cp.etcd = p
		cp.mu.Unlock()
		err = waitEtcd(ctx, p)
		if err == nil {
			cp.EtcdURL = url
			cp.opts.Logf("testbed: etcd ready on %s in %v", url, time.Since(began).Round(time.Millisecond))
			return nil
		}
		cp.mu.Lock()
		cp.etcd = nil
		cp.mu.Unlock()
		p.stop(stopGrace)
		if !errors.Is(err, errAddrInUse) || attempt == portAttempts {
			return err
		}
		cp.opts.Logf("testbed: etcd lost its port, retrying: %v", err)
	}
}

func waitEtcd(ctx context.Context, p *process) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if strings.Contains(p.output(), etcdReadyLine) {
			return nil
		}
		if err := p.exitError(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("etcd not ready: %w; log %s ends:\n%s", context.Cause(ctx), p.logPath, tailLines(p.output(), 30))
		case <-tick.C:
		}
	}
}

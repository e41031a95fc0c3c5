// Command etcd is a single-member etcd server built on
// go.etcd.io/etcd/server/v3/embed for the groundcloud test bed. It serves
// clients on one loopback URL and stops cleanly on SIGINT or SIGTERM.
package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "etcd:", err)
		os.Exit(1)
	}
}

func run() error {
	dataDir := flag.String("data-dir", "", "directory for the member's data (required)")
	clientURL := flag.String("listen-client-url", "http://127.0.0.1:2379", "URL to serve clients on")
	peerURL := flag.String("listen-peer-url", "http://127.0.0.1:2380", "URL to serve peers on")
	flag.Parse()
	if *dataDir == "" {
		return fmt.Errorf("--data-dir is required")
	}
	cu, err := url.Parse(*clientURL)
	if err != nil {
		return fmt.Errorf("parse --listen-client-url: %w", err)
	}
	pu, err := url.Parse(*peerURL)
	if err != nil {
		return fmt.Errorf("parse --listen-peer-url: %w", err)
	}

	cfg := embed.NewConfig()
	cfg.Name = "testbed"
	cfg.Dir = *dataDir
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = cfg.Name + "=" + pu.String()
	cfg.LogLevel = "warn"
	// The test bed throws the data away; skipping fsync makes start-up and
	// writes fast on shared machines.
	cfg.UnsafeNoFsync = true

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		e.Server.Stop()
		return fmt.Errorf("not ready after 60s")
	}
	fmt.Fprintln(os.Stderr, "etcd: ready on", cu.String())

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case s := <-sig:
		fmt.Fprintln(os.Stderr, "etcd: stopping on", s)
		return nil
	case err := <-e.Err():
		return fmt.Errorf("serve: %w", err)
	}
}

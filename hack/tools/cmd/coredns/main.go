// Command coredns is the cluster DNS of the test bed's real cluster and of
// the sandbox: CoreDNS (github.com/coredns/coredns) with the plugins a
// cluster's kube-dns Deployment uses, the way a kubeadm cluster configures
// it (errors, health, ready, kubernetes, cache, loop, reload, loadbalance,
// forward, log), and hosts, which Kubernetes' DNS e2e specs configure
// when they run this binary as their own test server (/coredns in the
// agnhost image, test/framework/realcluster BuildAgnhost). Built in the
// tools module's one go build so that it shares client-go with the
// Kubernetes binaries.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
	_ "github.com/coredns/coredns/plugin/whoami"
)

func init() {
	// The order plugins run in, as CoreDNS's own plugin.cfg has it.
	dnsserver.Directives = []string{
		"bind", "errors", "log", "health", "ready", "loadbalance", "cache",
		"whoami", "hosts", "kubernetes", "loop", "reload", "forward",
	}
}

func main() { coremain.Run() }

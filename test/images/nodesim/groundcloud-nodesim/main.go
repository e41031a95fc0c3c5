// Command groundcloud-nodesim is a simulated Kubernetes node's data path for
// the network-namespace test bed: it answers on NodePorts with its node name
// and on health ports like kube-proxy. See package nodesim.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/groundcloud/groundcloud/test/images/nodesim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err := nodesim.Main(ctx, os.Args[0], os.Args[1:], os.Stdout)
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "groundcloud-nodesim:", err)
		os.Exit(1)
	}
}

// Command groundcloud-agent programs groundcloud load balancers on a
// load-balancer host.
package main

import (
	"os"

	"k8s.io/component-base/cli"

	"github.com/groundcloud/groundcloud/internal/agent"
)

func main() {
	os.Exit(cli.Run(agent.NewCommand()))
}

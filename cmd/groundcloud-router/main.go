// Command groundcloud-router programs groundcloud pod routes into the
// kernel of a node or of a gateway in front of the nodes.
package main

import (
	"os"

	"k8s.io/component-base/cli"

	"github.com/groundcloud/groundcloud/internal/router"
)

func main() {
	os.Exit(cli.Run(router.NewCommand()))
}

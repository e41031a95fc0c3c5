// Command groundcloud-sandbox runs a whole groundcloud installation on this
// machine: `up` (until Ctrl-C) and `down`.
package main

import (
	"os"

	"k8s.io/component-base/cli"

	sandboxcli "github.com/groundcloud/groundcloud/internal/sandbox/cli"
)

func main() {
	os.Exit(cli.Run(sandboxcli.NewCommand()))
}

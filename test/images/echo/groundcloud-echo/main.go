// Command groundcloud-echo is the test bed's example application: it
// answers HTTP and UDP with the Pod and Node that answered (see package
// echo). The Pod passes POD_NAME and NODE_NAME from the downward API.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/groundcloud/groundcloud/test/images/echo"
)

func main() {
	c := echo.Config{Pod: os.Getenv("POD_NAME"), Node: os.Getenv("NODE_NAME")}
	flag.StringVar(&c.HTTPAddr, "http", ":8080", "HTTP listen address (empty: none)")
	flag.StringVar(&c.UDPAddr, "udp", ":8081", "UDP listen address (empty: none)")
	flag.StringVar(&c.LinesAddr, "lines", ":8082", "TCP listen address of the line echo for long-lived connections (empty: none)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := echo.Run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

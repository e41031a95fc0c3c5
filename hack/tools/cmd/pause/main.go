// Command pause is the sandbox ("pause") container of the test bed's nodes:
// the process that holds a Pod's namespaces while its containers come and
// go. Like the upstream pause image it does nothing but wait: it reaps the
// children it inherits and exits 0 on SIGINT or SIGTERM. It is built as a
// static binary (no cgo: it imports neither net nor os/user), so its image
// holds this file alone.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		os.Stdout.WriteString("pause (groundcloud test bed)\n")
		return
	}
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		// Reap every exited child: as PID 1 of the Pod's PID namespace (if
		// shared) orphans become ours.
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}

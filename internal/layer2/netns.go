package layer2

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// inNamespace runs fn on a new goroutine locked to a thread switched into
// ns and waits for it; a closed ns (netns.None()) runs fn where the caller is.
// Sockets fn creates stay in ns for their whole life. If switching back
// fails, the thread stays locked and is destroyed when its goroutine ends
// rather than serving other goroutines from the wrong namespace.
func inNamespace(ns netns.NsHandle, fn func() error) error {
	if !ns.IsOpen() {
		return fn()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("get namespace of thread: %w", err)
			return
		}
		defer orig.Close()
		if err := netns.Set(ns); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter namespace: %w", err)
			return
		}
		err = fn()
		if restoreErr := netns.Set(orig); restoreErr != nil {
			errc <- errors.Join(err, fmt.Errorf("restore namespace of thread: %w", restoreErr))
			return // still locked: the thread ends with this goroutine
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	return <-errc
}

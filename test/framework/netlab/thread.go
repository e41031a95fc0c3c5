package netlab

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// onThread runs fn on a new goroutine locked to its OS thread and waits for
// it. Whatever namespace fn switches the thread into, the thread is switched
// back afterwards; if that fails the goroutine exits still locked, which
// makes the Go runtime destroy the thread instead of reusing it. A panic in
// fn is re-raised in the caller.
func onThread(fn func() error) error {
	type result struct {
		err      error
		panicked any
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("get namespace of thread: %w", err)}
			return
		}
		defer orig.Close()
		var res result
		func() {
			defer func() { res.panicked = recover() }()
			res.err = fn()
		}()
		if err := netns.Set(orig); err != nil {
			// Stay locked: the thread ends with this goroutine.
			res.err = errors.Join(res.err, fmt.Errorf("restore namespace of thread: %w", err))
		} else {
			runtime.UnlockOSThread()
		}
		done <- res
	}()
	res := <-done
	if res.panicked != nil {
		panic(res.panicked)
	}
	return res.err
}

// inNamespace runs fn on a thread switched into ns (see onThread).
func inNamespace(ns netns.NsHandle, fn func() error) error {
	return onThread(func() error {
		if err := netns.Set(ns); err != nil {
			return fmt.Errorf("enter namespace: %w", err)
		}
		return fn()
	})
}

// netlinkIn returns a netlink handle whose sockets live in ns. It opens
// them on a thread of its own rather than with netlink.NewHandleAt, which
// unlocks its thread even when switching it back fails.
func netlinkIn(ns netns.NsHandle) (*netlink.Handle, error) {
	var h *netlink.Handle
	err := inNamespace(ns, func() error {
		var err error
		h, err = netlink.NewHandle()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("netlink: %w", err)
	}
	return h, nil
}

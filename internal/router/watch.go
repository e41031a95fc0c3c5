package router

import (
	"context"
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// Watcher is a Table that can tell when the kernel's routes may have moved
// away from what the router programmed. *NetlinkTable implements it.
type Watcher interface {
	// Watch calls changed, from another goroutine, after each such
	// change until ctx ends; it returns once it is watching.
	Watch(ctx context.Context, changed func()) error
}

// Watch subscribes, in the network namespace of the calling thread, to
// the kernel's route changes and calls changed for each in the main table
// other than the addition of a route of ours: a route of ours deleted by
// hand, another protocol's route to a destination we want going away, a
// link going down (the kernel drops its connected routes, and with them
// every route over it, ours included) and coming back (its connected
// routes return, and ours can be added again). The router's own deletes
// make it sync once more, which finds nothing to do. A subscription that
// fails later is logged; the full checks (--max-sync-interval) remain.
func (t *NetlinkTable) Watch(ctx context.Context, changed func()) error {
	logger := klog.FromContext(ctx)
	routes := make(chan netlink.RouteUpdate, 64)
	onErr := func(err error) {
		if ctx.Err() != nil {
			return // the subscription closing
		}
		logger.Error(err, "Watching the kernel's routes; a full check follows")
		changed()
	}
	if err := netlink.RouteSubscribeWithOptions(routes, ctx.Done(), netlink.RouteSubscribeOptions{ErrorCallback: onErr}); err != nil {
		return fmt.Errorf("watch routes: %w", err)
	}
	go func() {
		for u := range routes {
			if t.routeMatters(u) {
				changed()
			}
		}
		if ctx.Err() == nil {
			logger.Error(nil, "Stopped watching the kernel's routes; only full checks (--max-sync-interval) follow")
		}
	}()
	return nil
}

// routeMatters says whether a route change may need the router: anything
// in the main table but the addition of a route of ours.
func (t *NetlinkTable) routeMatters(u netlink.RouteUpdate) bool {
	if u.Table != unix.RT_TABLE_MAIN {
		return false
	}
	return u.Type != unix.RTM_NEWROUTE || u.Protocol != t.protocol
}

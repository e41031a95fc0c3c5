package agent

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// readyWait bounds how long a restarted agent reports not ready while it
// waits to advertise again the routes its host advertised before (a
// router that does not answer must not stall a rolling update for good).
const readyWait = 60 * time.Second

// readiness is what the agent's /readyz says: ready once a data plane sync
// has succeeded and, when the LoadBalancers' status says this host
// advertised routes over BGP before the agent started (a restart, a
// rolling update), once it has a BGP session and advertises routes again
// (or readyWait has passed). A DaemonSet's rolling update stops the next
// host's agent only when this one is ready: that host's withdrawal then
// leaves the router a path through this one.
type readiness struct {
	mu       sync.Mutex
	start    time.Time
	synced   bool
	wantBGP  bool // this host advertised routes before the agent started
	bgpAgain bool // it has a session and advertises routes again
}

// expectBGP records that this host advertised routes before this agent.
func (r *readiness) expectBGP(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.start, r.wantBGP = now, true
}

// note records a sync: whether the data plane was programmed, and
// whether routes are advertised over an established session.
func (r *readiness) note(programmed, advertising bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.synced = r.synced || programmed
	r.bgpAgain = r.bgpAgain || advertising
}

// ready says why the agent is not ready (nil: it is) at now.
func (r *readiness) ready(now time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case !r.synced:
		return errors.New("no data plane sync has succeeded yet")
	case r.wantBGP && !r.bgpAgain && now.Sub(r.start) < readyWait:
		return fmt.Errorf("this host advertised routes before the agent started and does not advertise them again yet (no established BGP session); ready anyway %s after the start", readyWait)
	}
	return nil
}

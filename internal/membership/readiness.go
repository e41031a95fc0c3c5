package membership

import (
	"slices"
	"time"
)

// State is how a member stands towards holding addresses. Each member
// decides its own State and publishes it in its gossip metadata; every
// member computes ownership over the Ready ones.
type State string

// The states of a member.
const (
	// StateStarting: it has not yet tried to join the others.
	StateStarting State = "Starting"
	// StateUnhealthy: its data plane is not programmed, its interface is
	// down or it reaches no node; it holds no address.
	StateUnhealthy State = "Unhealthy"
	// StateHoldDown: healthy again after being unhealthy or starting, with
	// other members around; it waits HoldDown before taking its share back,
	// so that a flapping host moves no address and a host cut off from the
	// others rejoins them before it claims anything.
	StateHoldDown State = "HoldDown"
	// StateReady: it holds the addresses rendezvous hashing gives it.
	StateReady State = "Ready"
	// StateLeaving: its agent is stopping and leaves the gossip next; it
	// holds no address the others would take. Published only, in the
	// moment before the leave, so that a member in its hold-down knows
	// that nobody else serves and takes over at once (see update): a
	// rolling update stops the next host's agent while the one restarted
	// before is still holding down. An agent that does not know this
	// State reads it as Starting, with the same effect.
	StateLeaving State = "Leaving"
	// StateDraining: Ready, but its Node is cordoned (kubectl cordon or
	// drain: maintenance, a reboot to come). It owns an address only when
	// no Ready member may: the others take its share over, and a single
	// host keeps serving until it stops. Published only; an agent that
	// does not know this State reads it as Starting (never an owner).
	StateDraining State = "Draining"
)

// Health is what a host knows about itself.
type Health struct {
	// Joined: it has tried to join the seeds and peers it knows of.
	Joined bool
	// Problem says why it may not hold addresses; empty when it may.
	Problem string
}

// readiness turns a host's health over time into its State. It is pure:
// the caller passes the time and wakes it at Until.
type readiness struct {
	holdDown time.Duration
	state    State
	until    time.Time // end of the hold-down
	// sawPeer: another member was alive while this process ran. Until then
	// this host is alone (a lone host, or the first of the agents to start):
	// nobody serves that it would take addresses from, so it needs no
	// hold-down. After that, being healthy alone may mean being cut off
	// from members that serve (a link that just came back), so it waits.
	sawPeer bool
}

func newReadiness(holdDown time.Duration) *readiness {
	return &readiness{holdDown: holdDown, state: StateStarting}
}

// Peers is what a host sees of the others.
type Peers struct {
	// Alive: another member is alive (or suspect) now.
	Alive bool
	// Serving: one of them is Ready, i.e. holds addresses.
	Serving bool
}

// peersOf summarises members.
func peersOf(members []Member) Peers {
	var p Peers
	for _, m := range members {
		p.Alive = true
		p.Serving = p.Serving || m.State == StateReady || m.State == StateDraining
	}
	return p
}

// update moves the state for health h at now, given what the host sees
// of the others. It reports whether the state changed.
//
// A healthy host holds down only when the hold-down protects something:
// when others serve (it would take addresses from them, perhaps only to
// lose its health again), or when it has seen others before and sees none
// now (it may be cut off from members that serve). When it sees others
// and none of them serves (all agents starting together, or all the others
// unhealthy), nobody holds the addresses and waiting would only keep them
// down.
func (r *readiness) update(now time.Time, h Health, p Peers) bool {
	old := r.state
	idle := p.Alive && !p.Serving
	switch {
	case !h.Joined:
		r.state = StateStarting
	case h.Problem != "":
		r.state = StateUnhealthy
	case r.state == StateReady:
	case r.state == StateHoldDown:
		if !now.Before(r.until) || idle {
			r.state = StateReady
		}
	case !r.sawPeer && !p.Alive || idle || r.holdDown <= 0:
		r.state = StateReady
	default:
		r.state, r.until = StateHoldDown, now.Add(r.holdDown)
	}
	r.sawPeer = r.sawPeer || p.Alive
	return r.state != old
}

// wake is when update must run again although nothing else changed (zero:
// never).
func (r *readiness) wake() time.Time {
	if r.state == StateHoldDown {
		return r.until
	}
	return time.Time{}
}

// Member is another host as gossip shows it.
type Member struct {
	Name  string
	State State
	// MAC is the hardware address of its --interface (empty if unknown).
	MAC string
	// Addr is its gossip address, host:port.
	Addr string
	// Groups are the host groups it belongs to; nil: every group (it
	// publishes none: see groups.go).
	Groups []string
	// BGP are the address families it may advertise over BGP; nil: every
	// family (it publishes none: see bgp.go).
	BGP []string
	// Sessions are the address families of its established BGP sessions,
	// whether or not it may advertise them yet (a member in its hold-down
	// has them); nil: unknown (an older member publishes none).
	Sessions []string
}

// candidates are the members that may own addresses: the Ready ones, this
// host included when it is Ready; sorted.
func candidates(self string, selfState State, peers []Member) []string {
	return membersIn(StateReady, self, selfState == StateReady, peers)
}

// drainersOf are the Draining members, this host included when it yields
// (self draining and past its hand-over); sorted.
func drainersOf(self string, selfYields bool, peers []Member) []string {
	return membersIn(StateDraining, self, selfYields, peers)
}

// membersIn are the peers in state, and self when selfIn; sorted.
func membersIn(state State, self string, selfIn bool, peers []Member) []string {
	var out []string
	if selfIn {
		out = append(out, self)
	}
	for _, p := range peers {
		if p.State == state && p.Name != self {
			out = append(out, p.Name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

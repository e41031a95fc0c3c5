package membership

import (
	"maps"
	"net/netip"
	"slices"
	"time"
)

// A split brain is two hosts answering for one virtual IP. The guard (see
// guard.go) probes each address this host owns (ARP for IPv4, Neighbor
// Discovery for IPv6: internal/layer2, ndp.go) and listens to the link;
// every ARP frame or Neighbor Discovery message in which another station
// claims such an address (a layer2.Claim) is a sighting. conflicts turns sightings into decisions. It is
// pure: the caller passes the time.
//
// Sightings are active when another agent claims the address (an ARP
// probe or announcement: its guard or its takeover; an IPv6 DAD probe: its
// guard) and passive when only a kernel uses it (a reply to our probe, or a
// request sent from it). A kernel alone holding the address is what an agent killed with SIGKILL
// leaves behind: this host keeps the address and defends it by announcing
// it again. When another agent actively claims it and that agent is not a
// live member (gossip between the two is cut), both hosts decide alike by
// rendezvous hashing over the pair: the loser yields (stops holding the
// address while the winner keeps claiming it), the winner defends. A live
// member claiming an address is a handover in progress: gossip settles it.

// Action is what this host does about a conflict on one address.
type Action string

// The actions.
const (
	// ActionNone: no conflict.
	ActionNone Action = ""
	// ActionDefend: keep the address and announce it again.
	ActionDefend Action = "Defend"
	// ActionYield: stop holding the address while the other claims it.
	ActionYield Action = "Yield"
)

// sighting is one ARP frame or Neighbor Discovery message in which another
// station claims a VIP. MAC is empty for an IPv6 DAD probe (see observe).
type sighting struct {
	VIP    netip.Addr
	MAC    string
	Active bool
	At     time.Time
}

type sightingKey struct {
	vip netip.Addr
	mac string
}

type evidence struct {
	first, last, lastActive time.Time
}

// Conflict is a change in the conflict on one address.
type Conflict struct {
	VIP netip.Addr
	// MAC is the other station's hardware address; Host its member name
	// when gossip ever showed it ("" otherwise).
	MAC, Host string
	// Action is what this host does now; ActionNone when the conflict ended.
	Action Action
	// Active: the other host's agent claims the address (not only its kernel).
	Active bool
}

// conflicts decides what to do about sightings.
type conflicts struct {
	// window: a sighting older than this is forgotten (a few probe rounds).
	// confirm: a conflict counts once its sightings span this long, so that
	// the moment of a handover, when the old holder still answers, is none.
	window, confirm time.Duration
	seen            map[sightingKey]*evidence
	actions         map[netip.Addr]Conflict
	wanted          map[netip.Addr]bool // at the last decide
}

func newConflicts(probeInterval time.Duration) *conflicts {
	return &conflicts{
		window:  3 * probeInterval,
		confirm: probeInterval / 2,
		seen:    map[sightingKey]*evidence{},
		actions: map[netip.Addr]Conflict{},
	}
}

// observe records a sighting.
//
// A sighting without a MAC (an IPv6 DAD probe, see internal/layer2's
// ndp.go) is attributed to the one station seen answering for the address
// within the window: the probing host holds the address, so its kernel
// answers this host's probes and its MAC is known a round later; the probe
// refreshes that evidence as active. That is what decide needs: it keys
// evidence by MAC and finds the member by it (gossip metadata) to yield.
// With no station seen it is dropped (it counts from the next round); with
// several (say a killed agent's kernel and a partitioned agent) it is
// dropped too: attributed to the wrong one it could make this host yield
// to a dead host, and without it this host defends, as it does against
// kernels.
func (c *conflicts) observe(s sighting) {
	if s.MAC == "" {
		var only *evidence
		for k, e := range c.seen {
			if k.vip != s.VIP || s.At.Sub(e.last) > c.window {
				continue
			}
			if only != nil {
				return
			}
			only = e
		}
		if only != nil {
			only.last = s.At
			if s.Active {
				only.lastActive = s.At
			}
		}
		return
	}
	k := sightingKey{s.VIP, s.MAC}
	e := c.seen[k]
	if e == nil {
		e = &evidence{first: s.At}
		c.seen[k] = e
	}
	e.last = s.At
	if s.Active {
		e.lastActive = s.At
	}
}

// peerView is what gossip says about other hosts, for decide.
type peerView struct {
	self string
	// hostOf maps a MAC to the member that published it (alive or not).
	hostOf map[string]string
	// alive are the members gossip sees now.
	alive map[string]bool
}

// decide returns what to do now about each of wanted (the addresses
// rendezvous hashing gives this host) and the conflicts that started,
// changed or ended since the last call.
func (c *conflicts) decide(now time.Time, wanted []netip.Addr, view peerView) (map[netip.Addr]Action, []Conflict) {
	isWanted := map[netip.Addr]bool{}
	for _, v := range wanted {
		isWanted[v] = true
	}
	// Evidence counts only from the decision on which this host wanted the
	// address: before, the previous owner claimed it rightly, and a
	// handover would look like a split brain.
	for k, e := range c.seen {
		if now.Sub(e.last) > c.window || !isWanted[k.vip] || !c.wanted[k.vip] {
			delete(c.seen, k)
		}
	}
	c.wanted = isWanted
	current := map[netip.Addr]Conflict{}
	for _, k := range slices.SortedFunc(maps.Keys(c.seen), compareKeys) {
		e := c.seen[k]
		if e.last.Sub(e.first) < c.confirm {
			continue
		}
		active := now.Sub(e.lastActive) <= c.window
		host := view.hostOf[k.mac]
		cf := Conflict{VIP: k.vip, MAC: k.mac, Host: host, Action: ActionDefend, Active: active}
		if active && host != "" && host != view.self && !view.alive[host] && Owner(k.vip, []string{view.self, host}) == host {
			cf.Action = ActionYield
		}
		if old, ok := current[k.vip]; !ok || old.Action != ActionYield {
			current[k.vip] = cf
		}
	}
	var changes []Conflict
	for v, cf := range current {
		if old, ok := c.actions[v]; !ok || old.Action != cf.Action || old.MAC != cf.MAC {
			changes = append(changes, cf)
		}
	}
	for v, old := range c.actions {
		if _, ok := current[v]; !ok {
			changes = append(changes, Conflict{VIP: v, MAC: old.MAC, Host: old.Host, Action: ActionNone})
		}
	}
	c.actions = current
	slices.SortFunc(changes, func(a, b Conflict) int { return a.VIP.Compare(b.VIP) })
	out := make(map[netip.Addr]Action, len(current))
	for v, cf := range current {
		out[v] = cf.Action
	}
	return out, changes
}

func compareKeys(a, b sightingKey) int {
	if c := a.vip.Compare(b.vip); c != 0 {
		return c
	}
	switch {
	case a.mac < b.mac:
		return -1
	case a.mac > b.mac:
		return 1
	}
	return 0
}

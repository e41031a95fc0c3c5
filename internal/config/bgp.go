package config

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
)

// Announce is how a pool's addresses are made known to the network.
type Announce string

const (
	// AnnounceL2 answers ARP and NDP for each address on one host at a time
	// (memberlist elects it), as before BGP existed.
	AnnounceL2 Announce = "l2"
	// AnnounceBGP advertises each address as a host route (/32, /128) to
	// the [BGPPeer] routers.
	AnnounceBGP Announce = "bgp"
)

// BGPPeer is a [BGPPeer "name"] section: a router the agents of the
// load-balancer hosts it selects open a BGP session with. The agents read
// these sections from the same cloud-config the controller manager reads.
type BGPPeer struct {
	Name     string
	Address  netip.Addr
	ASN      uint32
	LocalASN uint32
	Port     int32
	// PasswordFile holds the TCP-MD5 password (RFC 2385); "" means none.
	// The file is read by the agents, never logged.
	PasswordFile string
	HoldTime     time.Duration
	// KeepaliveTime defaults to a third of HoldTime.
	KeepaliveTime time.Duration
	// SourceAddress is the local address of the session; invalid means the
	// kernel's choice.
	SourceAddress netip.Addr
	// Multihop is the TTL of an eBGP session to a peer that is not on a
	// shared link; 0 means directly connected (TTL 1).
	Multihop int
	// Passive waits for the peer to connect.
	Passive bool
	// Families are the address families the session carries: "ipv4",
	// "ipv6"; by default the family of Address.
	Families []string
	// Hosts selects the load-balancer hosts that peer with this router
	// (labels.Everything when not given).
	Hosts labels.Selector
	// BFD runs a single-hop BFD session beside the BGP session, with
	// these timers (filled with the defaults when BFD is on).
	BFD                                     bool
	BFDTransmitInterval, BFDReceiveInterval time.Duration
	BFDDetectMultiplier                     int
	// GracefulRestart negotiates BGP graceful restart (RFC 4724) with the
	// router, which keeps this host's routes for GracefulRestartTime
	// while the agent restarts (filled with the default when on).
	GracefulRestart     bool
	GracefulRestartTime time.Duration
}

// DefaultGracefulRestartTime is graceful-restart-time's default: how long
// the router keeps a restarting host's routes.
const DefaultGracefulRestartTime = 120 * time.Second

// The BFD timers of a peer that sets none: 300 ms, times 3.
const (
	DefaultBFDInterval   = 300 * time.Millisecond
	DefaultBFDMultiplier = 3
)

// Community is a BGP standard community, written ASN:value.
type Community struct{ ASN, Value uint16 }

func (c Community) String() string { return fmt.Sprintf("%d:%d", c.ASN, c.Value) }

// BGPPeer returns the peer of the given name.
func (c *Config) BGPPeer(name string) (*BGPPeer, bool) {
	for _, p := range c.BGPPeers {
		if p.Name == name {
			return p, true
		}
	}
	return nil, false
}

var (
	announceValue = valueType[Announce]{
		name:  "announce",
		doc:   "`l2` or `bgp`, in any case.",
		parse: parseAnnounce,
	}
	selectorValue = valueType[labels.Selector]{
		name: "label selector",
		doc: "A Kubernetes label selector, as `kubectl get -l` takes it: `key=value`, `key!=value`, `key in (a,b)`, " +
			"`key`, `!key`, joined by commas (`node-restriction.kubernetes.io/edge=true,node-restriction.kubernetes.io/rack in (a,b)`). " +
			"Empty selects every host. Keys must be under `node-restriction.kubernetes.io/` unless `allow-node-set-labels` is true.",
		parse: parseSelector,
	}
	asnValue = valueType[uint32]{
		name:  "ASN",
		doc:   "An autonomous system number, 1 to 4294967295 (4-byte ASNs are written as plain numbers).",
		parse: parseASN,
	}
	durationValue = valueType[time.Duration]{
		name:  "duration",
		doc:   "A whole number of seconds with unit, as Go writes durations: `3s`, `90s`, `1m30s`.",
		parse: parseSeconds,
	}
	holdTimeValue = valueType[time.Duration]{
		name: "hold time",
		doc: "A duration (whole seconds, `3s`, `90s`) of at least 3s, the least BGP allows besides 0. " +
			"0 (no hold timer, no keepalives) is refused: GoBGP, the agents' BGP speaker, takes 0 for unset and would propose 90s.",
		parse: parseHoldTime,
	}
	communityValue = valueType[Community]{
		name:  "community",
		doc:   "A BGP standard community `ASN:value`, each part 0 to 65535 (`64512:100`).",
		parse: parseCommunity,
	}
	uint32Value = valueType[uint32]{
		name:  "unsigned",
		doc:   "A whole number, 0 to 4294967295.",
		parse: parseUint32,
	}
	ttlValue = valueType[int]{
		name:  "TTL",
		doc:   "A hop count, 1 to 255.",
		parse: parseTTL,
	}
	bfdIntervalValue = valueType[time.Duration]{
		name:  "BFD interval",
		doc:   "A duration in whole milliseconds from 10ms to 60s, as Go writes durations: `300ms`, `1s`.",
		parse: parseBFDInterval,
	}
	bfdMultiplierValue = valueType[int]{
		name:  "BFD multiplier",
		doc:   "A whole number from 2 to 255.",
		parse: parseBFDMultiplier,
	}
	restartTimeValue = valueType[time.Duration]{
		name:  "restart time",
		doc:   "A duration in whole seconds from 1s to 4095s (BGP's 12 bits), as Go writes durations: `120s`, `2m`.",
		parse: parseRestartTime,
	}
	familyValue = valueType[string]{
		name:  "family",
		doc:   "`ipv4` or `ipv6` (unicast), in any case.",
		parse: parseFamily,
	}
	filePath = valueType[string]{
		name:  "file path",
		doc:   "An absolute path to a file on the load-balancer host (in the agent's container: mount it there).",
		parse: parseFilePath,
	}
)

func parseAnnounce(s string) (Announce, error) {
	switch a := Announce(strings.ToLower(s)); a {
	case AnnounceL2, AnnounceBGP:
		return a, nil
	}
	if s == "" {
		return "", errEmpty
	}
	return "", fmt.Errorf("%q is not a way to announce; use l2 or bgp", s)
}

func parseSelector(s string) (labels.Selector, error) {
	sel, err := labels.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%q is not a label selector: %w", s, err)
	}
	return sel, nil
}

func parseASN(s string) (uint32, error) {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("%q is not an ASN: use a number from 1 to 4294967295", s)
	}
	return uint32(n), nil
}

func parseUint32(s string) (uint32, error) {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number from 0 to 4294967295", s)
	}
	return uint32(n), nil
}

func parseSeconds(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d%time.Second != 0 || d > 65535*time.Second {
		return 0, fmt.Errorf("%q is not a duration in whole seconds (such as 3s or 90s) up to 65535s", s)
	}
	return d, nil
}

func parseHoldTime(s string) (time.Duration, error) {
	d, err := parseSeconds(s)
	switch {
	case err != nil:
		return 0, err
	case d == 0:
		// RFC 4271 allows 0, but GoBGP takes 0 for "not set" and
		// proposes its default, 90s, instead.
		return 0, fmt.Errorf("%q (no hold timer) is not supported: the agents' BGP speaker (GoBGP) would propose 90s instead; "+
			"use 3s or more (a router that proposes 0 still turns the session's keepalives off: the lower value wins)", s)
	case d < 3*time.Second:
		return 0, fmt.Errorf("%q is below 3s, the least BGP allows besides 0", s)
	}
	return d, nil
}

func parseCommunity(s string) (Community, error) {
	a, v, ok := strings.Cut(s, ":")
	x, err1 := strconv.ParseUint(a, 10, 16)
	y, err2 := strconv.ParseUint(v, 10, 16)
	if !ok || err1 != nil || err2 != nil {
		return Community{}, fmt.Errorf("%q is not a community: write ASN:value, each 0 to 65535", s)
	}
	return Community{uint16(x), uint16(y)}, nil
}

func parseTTL(s string) (int, error) {
	n, err := strconv.ParseUint(s, 10, 8)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("%q is not a hop count from 1 to 255", s)
	}
	return int(n), nil
}

func parseBFDInterval(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d%time.Millisecond != 0 || d < 10*time.Millisecond || d > 60*time.Second {
		return 0, fmt.Errorf("%q is not a duration in whole milliseconds from 10ms to 60s (such as 300ms)", s)
	}
	return d, nil
}

func parseRestartTime(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d%time.Second != 0 || d < time.Second || d > 4095*time.Second {
		return 0, fmt.Errorf("%q is not a duration in whole seconds from 1s to 4095s (such as 120s)", s)
	}
	return d, nil
}

func parseBFDMultiplier(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 2 || n > 255 {
		return 0, fmt.Errorf("%q is not a number from 2 to 255 (1 would take a session down on one lost packet)", s)
	}
	return n, nil
}

func parseFamily(s string) (string, error) {
	switch f := strings.ToLower(s); f {
	case "ipv4", "ipv6":
		return f, nil
	}
	return "", fmt.Errorf("%q is not an address family; use ipv4 or ipv6", s)
}

func parseFilePath(s string) (string, error) {
	if !strings.HasPrefix(s, "/") {
		return "", fmt.Errorf("%q is not an absolute path", s)
	}
	return s, nil
}

func addCommunity(t *target, c Community) error {
	if err := t.once("bgp-community", c.String()); err != nil {
		return err
	}
	t.pool.Communities = append(t.pool.Communities, c)
	return nil
}

func addFamily(t *target, f string) error {
	if err := t.once("family", f); err != nil {
		return err
	}
	t.peer.Families = append(t.peer.Families, f)
	return nil
}

func setLocalPreference(t *target, v uint32) error {
	t.pool.LocalPreference = &v
	return nil
}

// bgpKeys are the keys of [BGPPeer] sections and the BGP keys of [Pool].
var bgpKeys = []keySpec{
	{
		section: poolSection, name: "announce", dflt: string(AnnounceL2),
		value: assign(announceValue, func(t *target) *Announce { return &t.pool.Announce }),
		doc: "How the pool's addresses are made known to the network. `l2`: one load-balancer host at a time answers ARP " +
			"and NDP for each address (memberlist elects it among the hosts `hosts` selects); clients and hosts share a segment. " +
			"`bgp`: the selected hosts advertise each address as a host route (`/32`, `/128`) to the `[BGPPeer]` routers. " +
			"With `passthrough` forwarding every healthy selected host advertises every address and the router spreads " +
			"flows over them (ECMP): hosts keep no per-flow state, so any of them serves any packet. With `proxy` forwarding " +
			"only the host memberlist elects advertises an address, because replies must return through the host that holds " +
			"the flow's conntrack state. A host withdraws its routes before it stops serving ([docs/bgp.md](bgp.md)).",
	},
	{
		section: poolSection, name: "hosts", dfltDoc: "every host",
		value: bind(selectorValue, setPoolHosts),
		doc: "Which load-balancer hosts announce and serve the pool's addresses, by the labels of the host's Node " +
			"(or the agent's `--host-labels` on a host that is not a Node): labels an administrator sets, under " +
			"`node-restriction.kubernetes.io/` (see `allow-node-set-labels` in `[Global]`). When no host matches, no host serves the pool's addresses. " +
			"The pools may use at most " + strconv.Itoa(MaxHostSelectors) + " different selectors: each host publishes those it matches in its gossip metadata.",
	},
	{
		section: poolSection, name: "bgp-community", multi: true,
		value: bind(communityValue, addCommunity),
		doc:   "Community attached to the routes of the pool's addresses (`announce = bgp` only).",
	},
	{
		section: poolSection, name: "bgp-local-preference",
		value: bind(uint32Value, setLocalPreference),
		doc:   "LOCAL_PREF attribute of the pool's routes, for iBGP peers (`announce = bgp` only; eBGP peers ignore it).",
	},
	{
		section: bgpPeerSection, name: "address", required: true,
		value: assign(ipAddress, func(t *target) *netip.Addr { return &t.peer.Address }),
		doc:   "The router's address, IPv4 or IPv6.",
	},
	{
		section: bgpPeerSection, name: "asn", required: true,
		value: assign(asnValue, func(t *target) *uint32 { return &t.peer.ASN }),
		doc:   "The router's AS number; equal to `local-asn` for iBGP.",
	},
	{
		section: bgpPeerSection, name: "local-asn", required: true,
		value: assign(asnValue, func(t *target) *uint32 { return &t.peer.LocalASN }),
		doc:   "The load-balancer hosts' AS number in this session.",
	},
	{
		section: bgpPeerSection, name: "port", dflt: "179",
		value: assign(portValue, func(t *target) *int32 { return &t.peer.Port }),
		doc:   "The router's TCP port.",
	},
	{
		section: bgpPeerSection, name: "password-file",
		value: assign(filePath, func(t *target) *string { return &t.peer.PasswordFile }),
		doc: "File holding the TCP-MD5 password (RFC 2385) of the session, its trailing newline dropped; " +
			"the agents read it at start and never log it. Without it the session is not signed.",
	},
	{
		section: bgpPeerSection, name: "hold-time", dflt: "90s",
		value: assign(holdTimeValue, func(t *target) *time.Duration { return &t.peer.HoldTime }),
		doc: "BGP hold time the hosts propose: a router drops the routes of a host it has not heard from for this long " +
			"(a crashed host). The session uses the lower of the two sides' values, so a router that proposes 0 " +
			"still turns its keepalives off.",
	},
	{
		section: bgpPeerSection, name: "keepalive-time", dfltDoc: "a third of `hold-time`",
		value: assign(durationValue, func(t *target) *time.Duration { return &t.peer.KeepaliveTime }),
		doc:   "Time between keepalives; less than `hold-time`.",
	},
	{
		section: bgpPeerSection, name: "source-address",
		value: assign(ipAddress, func(t *target) *netip.Addr { return &t.peer.SourceAddress }),
		doc:   "Local address of the session, of the family of `address`; by default the kernel chooses. Every selected host must have it, so it is for a peer selected by one host only.",
	},
	{
		section: bgpPeerSection, name: "multihop",
		value: assign(ttlValue, func(t *target) *int { return &t.peer.Multihop }),
		doc:   "TTL of an eBGP session to a router that is not on a shared link (eBGP multihop). Without it the router must be directly connected.",
	},
	{
		section: bgpPeerSection, name: "passive", dflt: "false",
		value: assign(boolValue, func(t *target) *bool { return &t.peer.Passive }),
		doc: "Whether the hosts wait for the router to connect instead of connecting themselves. The router connects to " +
			"the hosts' TCP port 179, which the agent needs `CAP_NET_BIND_SERVICE` to listen on (the shipped manifests grant it); " +
			"an agent that cannot listen has no session with its passive peers, and keeps the others ([docs/bgp.md](bgp.md#a-peer-that-cannot-work)).",
	},
	{
		section: bgpPeerSection, name: "family", multi: true, dfltDoc: "the family of `address`",
		value: bind(familyValue, addFamily),
		doc:   "Address family the session carries routes of (multiprotocol BGP): IPv4 routes over an IPv6 session, or both over one.",
	},
	{
		section: bgpPeerSection, name: "hosts", dfltDoc: "every host",
		value: bind(selectorValue, setPeerHosts),
		doc:   "Which load-balancer hosts peer with this router, by the labels of the host's Node (as in `[Pool]`): a rack's hosts with its switch.",
	},
	{
		section: bgpPeerSection, name: "bfd", dflt: "false",
		value: assign(boolValue, func(t *target) *bool { return &t.peer.BFD }),
		doc: "Whether each host also runs a BFD session (RFC 5880, single-hop as RFC 5881 says: UDP port 3784, TTL 255) with the router, " +
			"so that a dead link or host is noticed in `bfd-detect-multiplier` intervals instead of `hold-time`. The router must run BFD " +
			"for the session too (FRR: `neighbor ... bfd`); it takes the BGP session down, and so the host's routes, when BFD says the host is gone. " +
			"When BFD goes down on the host's side, the agent resets its BGP session with that router. " +
			"Directly connected routers only: refused with `multihop` ([docs/bgp.md](bgp.md#bfd)).",
	},
	{
		section: bgpPeerSection, name: "bfd-transmit-interval", dfltDoc: "`300ms`",
		value: assign(bfdIntervalValue, func(t *target) *time.Duration { return &t.peer.BFDTransmitInterval }),
		doc: "How often the host sends BFD packets once the session is Up (until then, once a second, as RFC 5880 says). " +
			"The two sides agree on the slower of one's transmit and the other's receive interval. Shorter detects sooner and costs " +
			"more packets (3 per second per router at 300ms, a few µs of CPU each); below 100ms a loaded host may miss its turn and flap the session.",
	},
	{
		section: bgpPeerSection, name: "bfd-receive-interval", dfltDoc: "`300ms`",
		value: assign(bfdIntervalValue, func(t *target) *time.Duration { return &t.peer.BFDReceiveInterval }),
		doc:   "The shortest interval between BFD packets the host asks the router to keep.",
	},
	{
		section: bgpPeerSection, name: "bfd-detect-multiplier", dfltDoc: "3",
		value: assign(bfdMultiplierValue, func(t *target) *int { return &t.peer.BFDDetectMultiplier }),
		doc: "How many intervals without a packet from the host the router waits before it declares the host gone: " +
			"the router's detection time is this times the agreed interval (900ms with the defaults). Lower detects sooner; " +
			"higher survives more lost packets in a row.",
	},
	{
		section: bgpPeerSection, name: "graceful-restart", dflt: "false",
		value: assign(boolValue, func(t *target) *bool { return &t.peer.GracefulRestart }),
		doc: "Whether the hosts negotiate BGP graceful restart (RFC 4724) with the router, so that an agent that restarts " +
			"(a rolling update, `helm upgrade`, a deleted Pod) on a host that is the only one to advertise some addresses keeps " +
			"its routes at the router, and its forwarding rules in place, until the agent that starts next has advertised them " +
			"again: no new connection fails. The router must help (FRR does by default; elsewhere often `graceful-restart helper`). " +
			"The price: a host that dies without BFD keeps its routes at the router for up to `graceful-restart-time` instead of " +
			"`hold-time`; with `bfd = true` a dead host's routes still go at once (the router's BFD takes the session down, which " +
			"is no restart) ([docs/bgp.md](bgp.md#graceful-restart)).",
	},
	{
		section: bgpPeerSection, name: "graceful-restart-time", dfltDoc: "`120s`",
		value: assign(restartTimeValue, func(t *target) *time.Duration { return &t.peer.GracefulRestartTime }),
		doc: "How long the router keeps a restarting host's routes (the Restart Time the host sends): longer than an agent takes " +
			"to start again, image pull included. Needs `graceful-restart = true`.",
	},
}

// checkBGP checks the rules across BGP keys and sections, and fills the
// defaults that depend on other keys.
func checkBGP(cfg *Config, pools map[*Pool]int, peers map[*BGPPeer]int, p *problems) {
	// GoBGP keys its peers by address alone: a second peer of the same
	// address (on another port, too) would fail on every host that selects
	// both.
	seen := map[netip.Addr]*BGPPeer{}
	for _, peer := range cfg.BGPPeers {
		checkPeer(peer, peers[peer], p)
		if first, dup := seen[peer.Address]; dup && peer.Address.IsValid() {
			p.add(peers[peer], sectionLabel("BGPPeer", peer.Name), "address",
				"%s is also [BGPPeer %q] on line %d; a host has one session per router address, whatever the port",
				peer.Address, first.Name, peers[first])
			continue
		}
		seen[peer.Address] = peer
	}
	checkHostSelectorCount(cfg, pools, p)
	for _, pool := range cfg.Pools {
		if pool.Hosts == nil {
			pool.Hosts = labels.Everything()
		}
		label := sectionLabel("Pool", pool.Name)
		switch {
		case pool.Announce == AnnounceBGP && len(cfg.BGPPeers) == 0:
			p.add(pools[pool], label, "announce", "bgp needs at least one [BGPPeer \"name\"] section: the routers to announce to")
		case pool.Announce != AnnounceBGP && (len(pool.Communities) > 0 || pool.LocalPreference != nil):
			p.add(pools[pool], label, "announce", "bgp-community and bgp-local-preference need announce = bgp")
		}
	}
}

func checkPeer(peer *BGPPeer, line int, p *problems) {
	label := sectionLabel("BGPPeer", peer.Name)
	if peer.Hosts == nil {
		peer.Hosts = labels.Everything()
	}
	if peer.KeepaliveTime == 0 {
		peer.KeepaliveTime = (peer.HoldTime / 3).Truncate(time.Second)
	} else if peer.HoldTime > 0 && peer.KeepaliveTime >= peer.HoldTime {
		p.add(line, label, "keepalive-time", "%s is not less than hold-time %s", peer.KeepaliveTime, peer.HoldTime)
	}
	if peer.SourceAddress.IsValid() && peer.Address.IsValid() && peer.SourceAddress.Is4() != peer.Address.Is4() {
		p.add(line, label, "source-address", "%s is not of the family of address %s", peer.SourceAddress, peer.Address)
	}
	if peer.Multihop > 0 && peer.ASN == peer.LocalASN && peer.ASN != 0 {
		p.add(line, label, "multihop", "applies to eBGP only; an iBGP session (asn = local-asn) is not limited to one hop")
	}
	checkBFD(peer, line, p)
	switch {
	case !peer.GracefulRestart && peer.GracefulRestartTime != 0:
		p.add(line, label, "graceful-restart-time", "needs graceful-restart = true")
	case peer.GracefulRestart && peer.GracefulRestartTime == 0:
		peer.GracefulRestartTime = DefaultGracefulRestartTime
	}
	if len(peer.Families) == 0 && peer.Address.IsValid() {
		peer.Families = []string{"ipv4"}
		if peer.Address.Is6() {
			peer.Families = []string{"ipv6"}
		}
	}
}

// checkBFD refuses BFD timers without bfd = true and BFD on a multihop
// peer, and fills the default timers.
func checkBFD(peer *BGPPeer, line int, p *problems) {
	label := sectionLabel("BGPPeer", peer.Name)
	if !peer.BFD {
		for _, k := range []struct {
			name string
			set  bool
		}{
			{"bfd-transmit-interval", peer.BFDTransmitInterval != 0},
			{"bfd-receive-interval", peer.BFDReceiveInterval != 0},
			{"bfd-detect-multiplier", peer.BFDDetectMultiplier != 0},
		} {
			if k.set {
				p.add(line, label, k.name, "needs bfd = true")
			}
		}
		return
	}
	if peer.Multihop > 0 {
		p.add(line, label, "bfd", "needs a directly connected router: the agents speak single-hop BFD (RFC 5881), and multihop is set")
	}
	if peer.BFDTransmitInterval == 0 {
		peer.BFDTransmitInterval = DefaultBFDInterval
	}
	if peer.BFDReceiveInterval == 0 {
		peer.BFDReceiveInterval = DefaultBFDInterval
	}
	if peer.BFDDetectMultiplier == 0 {
		peer.BFDDetectMultiplier = DefaultBFDMultiplier
	}
}

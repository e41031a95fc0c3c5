package membership

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"time"

	"k8s.io/klog/v2"
)

// Kinds of gossip errors (the reason label of
// groundcloud_membership_gossip_errors_total).
const (
	// GossipErrorDecrypt: a message from another host could not be
	// decrypted (it uses another key, or none).
	GossipErrorDecrypt = "Decrypt"
	// GossipErrorJoin: joining a known address failed (the host is down,
	// the port is blocked, or it uses another key and hung up).
	GossipErrorJoin = "Join"
)

// Reasons of GossipHealth.
const (
	// GossipHealthy: no message failed to decrypt lately, and every host
	// heard serving on the link is a member.
	GossipHealthy = "Healthy"
	// GossipDecryptFailed: another host's messages could not be decrypted.
	GossipDecryptFailed = "DecryptFailed"
	// GossipNotJoined: hosts serve on the link but are not members.
	GossipNotJoined = "NotJoined"
)

// GossipHealth says whether this host gossips with every other: Reason is
// GossipHealthy or names the problem, which Message explains.
type GossipHealth struct {
	Reason, Message string
}

// OK reports whether there is no problem.
func (g GossipHealth) OK() bool { return g.Reason == GossipHealthy }

// gossipErrors remembers recent gossip errors. It is pure: the caller
// passes the time.
type gossipErrors struct {
	// hold: a decrypt failure counts this long (the other side retries
	// joins every second, so a lasting mismatch never lapses).
	hold time.Duration
	// logEvery: each kind of error from each peer is logged at most once
	// per logEvery.
	logEvery time.Duration
	// settle: a host heard serving counts as not joined once it has been
	// so this long (a member suspected for a moment, or still joining, is
	// none), so that the condition, written into every LoadBalancer,
	// does not flap.
	settle        time.Duration
	decrypt       map[string]time.Time // sender's IP -> last failure
	logged        map[string]time.Time // kind + peer -> last logged
	unjoinedSince map[string]time.Time // host -> first seen not joined
}

func newGossipErrors() *gossipErrors {
	return &gossipErrors{
		hold: time.Minute, logEvery: 5 * time.Minute, settle: 10 * time.Second,
		decrypt: map[string]time.Time{}, logged: map[string]time.Time{}, unjoinedSince: map[string]time.Time{},
	}
}

// record notes an error of kind from peer (an address, with or without a
// port) and reports whether to log it.
func (g *gossipErrors) record(kind, peer string, at time.Time) bool {
	ip := hostOnly(peer)
	if kind == GossipErrorDecrypt && ip != "" {
		g.decrypt[ip] = at
	}
	key := kind + " " + ip
	if last, ok := g.logged[key]; ok && at.Sub(last) < g.logEvery {
		return false
	}
	g.logged[key] = at
	return true
}

// health is the state of gossip at now: unjoined are the hosts heard
// serving on the link that are not members (see unjoined), nameOf names
// the host of an IP ("" if unknown), port is the gossip port.
func (g *gossipErrors) health(now time.Time, unjoined []string, nameOf func(ip string) string, port int) GossipHealth {
	maps.DeleteFunc(g.decrypt, func(_ string, at time.Time) bool { return now.Sub(at) > g.hold })
	maps.DeleteFunc(g.logged, func(_ string, at time.Time) bool { return now.Sub(at) > g.logEvery })
	maps.DeleteFunc(g.unjoinedSince, func(name string, _ time.Time) bool { return !slices.Contains(unjoined, name) })
	var lasting []string
	for _, name := range unjoined {
		since, ok := g.unjoinedSince[name]
		if !ok {
			since = now
			g.unjoinedSince[name] = now
		}
		if now.Sub(since) >= g.settle {
			lasting = append(lasting, name)
		}
	}
	unjoined = lasting
	var parts []string
	reason := GossipHealthy
	if len(g.decrypt) > 0 {
		reason = GossipDecryptFailed
		var from []string
		for _, ip := range slices.Sorted(maps.Keys(g.decrypt)) {
			if n := nameOf(ip); n != "" {
				from = append(from, n+" ("+ip+")")
			} else {
				from = append(from, ip)
			}
		}
		parts = append(parts, fmt.Sprintf("gossip from %s cannot be decrypted: its gossip key differs from this host's", strings.Join(from, ", ")))
	}
	if len(unjoined) > 0 {
		if reason == GossipHealthy {
			reason = GossipNotJoined
		}
		parts = append(parts, fmt.Sprintf("%s hold addresses on the link but are not gossip members: check that every agent has the same gossip key and that port %d (UDP and TCP) is open between them", strings.Join(unjoined, ", "), port))
	}
	if reason == GossipHealthy {
		return GossipHealth{Reason: reason, Message: "no gossip errors"}
	}
	return GossipHealth{Reason: reason, Message: strings.Join(parts, "; ")}
}

// hostOnly returns the IP of "ip:port" or "ip".
func hostOnly(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return strings.Trim(addr, "[]")
}

// gossipError counts a gossip error of kind with peer, and logs it at the
// default level at most once per peer and kind every few minutes.
func (g *Gossip) gossipError(logger klog.Logger, kind, peer string, err error) {
	recordGossipError(kind)
	g.mu.Lock()
	log := g.gerrs.record(kind, peer, time.Now())
	g.mu.Unlock()
	if !log {
		return
	}
	if kind == GossipErrorDecrypt {
		logger.Info("Gossip from another agent cannot be decrypted: its gossip key differs from this host's", "from", peer)
		return
	}
	logger.Info("Cannot join another agent: it is down, the gossip port is blocked, or its gossip key differs", "address", peer, "err", err)
}

// hostOfIP names the host whose gossip address has ip, from gossip or the
// API ("" if none); g.mu is held.
func (g *Gossip) hostOfIP(ip string) string {
	for _, p := range g.peers {
		if hostOnly(p.Addr) == ip {
			return p.Name
		}
	}
	for _, h := range g.apiHosts {
		if hostOnly(h.Addr) == ip {
			return h.Name
		}
	}
	return ""
}

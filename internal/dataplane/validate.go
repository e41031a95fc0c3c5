package dataplane

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Validate reports every part of s that Desired leaves out, all at once. The
// data plane never fails as a whole because of one bad service: Desired
// programs everything else, so the caller uses Validate to tell users which
// service (and which VIP, port or backend of it) is not programmed and why.
func Validate(s State) error {
	_, problems := normalize(s)
	return errors.Join(problems...)
}

// ServiceProblem is one part of one service that Desired leaves out.
type ServiceProblem struct {
	Service string
	// Conflict: the part is a frontend (VIP, protocol, port) that another
	// service, whose name sorts first, already uses.
	Conflict bool
	// OffLinkNode names the backend a passthrough service cannot reach
	// because its address is on no link of the interface; the part left
	// out is that node's share of the flows.
	OffLinkNode string
	Err         error
}

func (p *ServiceProblem) Error() string { return fmt.Sprintf("service %q: %v", p.Service, p.Err) }

func (p *ServiceProblem) Unwrap() error { return p.Err }

// Problems returns what Validate reports, by service name: the parts of
// each service that Desired leaves out. Problems of no single service (a
// service without a name, or listed twice) are not in it.
func Problems(s State) map[string][]*ServiceProblem {
	_, problems := check(s, false)
	out := map[string][]*ServiceProblem{}
	for _, err := range problems {
		var p *ServiceProblem
		if errors.As(err, &p) {
			out[p.Service] = append(out[p.Service], p)
		}
	}
	return out
}

// service is a Service cleaned for planning: only valid parts, deduplicated,
// in a deterministic order, and only the frontends this service won.
type service struct {
	name     string
	group    string // Service.BucketGroup
	ports    []Port // sorted by protocol, then port
	backends []Backend
	// self is State.Self.
	self string
	// lbNodes is State.LBNodes.
	lbNodes  []string
	affinity bool
	// restricted is true when the Service had SourceRanges, even if none of
	// them was valid: an invalid range must never widen access to "all".
	restricted bool
	ranges     []netip.Prefix
	// frontends are the (VIP, port) pairs this service programs.
	frontends []frontend
	// routed: the VIPs are routed to this host, not local (Service.Routed).
	routed bool
	// passthrough: forwarded unchanged on iface to backends on links.
	passthrough bool
	iface       string
	links       []netip.Prefix
}

type frontend struct {
	vip  netip.Addr
	port Port
}

type frontendKey struct {
	vip   netip.Addr
	proto Protocol
	port  uint16
}

// normalize returns the programmable part of s, services sorted by name, and
// a problem for each part left out. When two services claim the same VIP,
// protocol and port, the one whose name sorts first keeps it.
func normalize(s State) ([]service, []error) { return check(s, true) }

// check is normalize, which returns the cleaned services only when keep is
// set (Problems needs only the problems).
func check(s State, keep bool) ([]service, []error) {
	var problems []error
	byName := slices.Clone(s.Services)
	slices.SortStableFunc(byName, func(a, b Service) int { return strings.Compare(a.Name, b.Name) })

	var out []service
	if keep {
		out = make([]service, 0, len(byName))
	}
	claimed := map[frontendKey]string{}
	var checked cleanCache
	for i, svc := range byName {
		if svc.Name == "" {
			problems = append(problems, errors.New("service with an empty name"))
			continue
		}
		if i > 0 && byName[i-1].Name == svc.Name {
			problems = append(problems, fmt.Errorf("service %q: listed more than once; only the first is programmed", svc.Name))
			continue
		}
		clean, p := normalizeService(svc, &checked)
		clean.self, clean.lbNodes = s.Self, s.LBNodes
		problems = append(problems, p...)
		if !normalizeForwarding(s, svc, &clean, &problems) {
			continue
		}
		for _, vip := range normalizeVIPs(svc, &problems) {
			for _, port := range clean.ports {
				key := frontendKey{vip, port.Protocol, port.Port}
				if owner, ok := claimed[key]; ok {
					problems = append(problems, &ServiceProblem{Service: svc.Name, Conflict: true,
						Err: fmt.Errorf("%s %s/%d is already used by service %q", vip, port.Protocol, port.Port, owner)})
					continue
				}
				claimed[key] = svc.Name
				clean.frontends = append(clean.frontends, frontend{vip, port})
			}
		}
		if keep {
			out = append(out, clean)
		}
	}
	return out, problems
}

// cleanCache remembers the last backend list cleanBackends passed: the
// services of one State usually share one list (the agent's Translate
// shares it), which is then checked once, not once per service.
type cleanCache struct{ last sharedList }

// clean is cleanBackends(backends), remembered for the last list that
// passed.
func (c *cleanCache) clean(backends []Backend) bool {
	if c.last.is(backends) {
		return true
	}
	if !cleanBackends(backends) {
		return false
	}
	c.last = sharedListOf(backends)
	return true
}

// sharedList identifies a backend list by its first element and length:
// the services of a State that share a list share its array, so that
// "the same list as the last service's" is one comparison.
type sharedList struct {
	first *Backend
	n     int
}

func sharedListOf(backends []Backend) sharedList {
	if len(backends) == 0 {
		return sharedList{}
	}
	return sharedList{&backends[0], len(backends)}
}

// is reports whether backends is the list l identifies (never for an
// empty one).
func (l sharedList) is(backends []Backend) bool {
	return len(backends) > 0 && l == sharedListOf(backends)
}

func normalizeService(svc Service, checked *cleanCache) (service, []error) {
	var problems []error
	bad := func(format string, args ...any) {
		problems = append(problems, &ServiceProblem{Service: svc.Name, Err: fmt.Errorf(format, args...)})
	}
	clean := service{name: svc.Name, group: svc.BucketGroup, affinity: svc.Affinity, restricted: len(svc.SourceRanges) > 0, routed: svc.Routed}

	clean.ports = make([]Port, 0, len(svc.Ports))
	for _, p := range svc.Ports {
		switch {
		case p.Protocol.nft() == "":
			bad("port %q: unsupported protocol %q", p.Name, p.Protocol)
		case p.Port == 0 || (p.NodePort == 0 && svc.Forwarding != Passthrough):
			bad("port %q: port and nodePort must be set (got %d and %d); only passthrough forwarding needs no nodePort", p.Name, p.Port, p.NodePort)
		case slices.ContainsFunc(clean.ports, func(q Port) bool { return q.Protocol == p.Protocol && q.Port == p.Port }):
			bad("port %s/%d listed more than once", p.Protocol, p.Port)
		default:
			clean.ports = append(clean.ports, p)
		}
	}
	slices.SortFunc(clean.ports, func(a, b Port) int {
		if c := strings.Compare(string(a.Protocol), string(b.Protocol)); c != 0 {
			return c
		}
		return int(a.Port) - int(b.Port)
	})

	if checked.clean(svc.Backends) {
		// Nothing to drop or sort (the usual case): use the list as it is,
		// shared with the caller, who may share it among services.
		clean.backends = svc.Backends
	} else {
		clean.backends = normalizeBackends(svc.Backends, bad)
	}

	for _, r := range svc.SourceRanges {
		if !r.IsValid() || r.Addr().Is4In6() || r.Addr().Zone() != "" {
			bad("unusable source range %q: it matches no client", r)
			continue
		}
		clean.ranges = append(clean.ranges, r.Masked())
	}
	clean.ranges = minimalPrefixes(clean.ranges)
	return clean, problems
}

// normalizeForwarding sets the passthrough fields of clean and reports
// whether the service can be programmed at all.
func normalizeForwarding(s State, svc Service, clean *service, problems *[]error) bool {
	bad := func(format string, args ...any) {
		*problems = append(*problems, &ServiceProblem{Service: svc.Name, Err: fmt.Errorf(format, args...)})
	}
	switch svc.Forwarding {
	case "", Proxy:
		return true
	case Passthrough:
	default:
		bad("unsupported forwarding %q", svc.Forwarding)
		return false
	}
	if s.Interface == "" {
		bad("passthrough forwarding needs the interface of this host that faces the nodes, and none is set")
		return false
	}
	clean.passthrough, clean.iface, clean.links = true, s.Interface, s.Links
	for _, b := range clean.backends {
		for _, f := range []family{ipv4, ipv6} {
			if !slices.ContainsFunc(svc.VIPs, f.is) {
				continue // no flow of this family to forward
			}
			if a := firstAddr(f, b); a.IsValid() && !onLink(s.Links, a) {
				*problems = append(*problems, &ServiceProblem{Service: svc.Name, OffLinkNode: b.Node, Err: fmt.Errorf(
					"backend %q: address %s is on no link of interface %s, so passthrough forwarding cannot reach it; it gets no flows", b.Node, a, s.Interface)})
			}
		}
	}
	return true
}

// onLink reports whether a is in one of links (true when links is empty:
// nothing to check against).
func onLink(links []netip.Prefix, a netip.Addr) bool {
	if len(links) == 0 {
		return true
	}
	return slices.ContainsFunc(links, func(p netip.Prefix) bool { return p.Contains(a) })
}

func normalizeVIPs(svc Service, problems *[]error) []netip.Addr {
	var vips []netip.Addr
	for _, vip := range svc.VIPs {
		if !validUnicast(vip) {
			*problems = append(*problems, &ServiceProblem{Service: svc.Name, Err: fmt.Errorf("unusable VIP %q", vip)})
			continue
		}
		vips = append(vips, vip)
	}
	slices.SortFunc(vips, netip.Addr.Compare)
	return slices.Compact(vips)
}

// validUnicast rejects the zero Addr, IPv4-mapped IPv6 (write plain IPv4),
// zoned, unspecified and multicast addresses.
func validUnicast(a netip.Addr) bool {
	return a.IsValid() && !a.Is4In6() && a.Zone() == "" && !a.IsUnspecified() && !a.IsMulticast()
}

// minimalPrefixes sorts prefixes and drops duplicates and prefixes contained
// in others: nft rejects overlapping intervals in one anonymous set.
func minimalPrefixes(in []netip.Prefix) []netip.Prefix {
	sorted := slices.Clone(in)
	slices.SortFunc(sorted, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	var out []netip.Prefix
	for _, p := range sorted {
		if n := len(out); n > 0 && out[n-1].Addr().BitLen() == p.Addr().BitLen() && out[n-1].Overlaps(p) {
			continue // sorted by address then length: the earlier one contains p
		}
		out = append(out, p)
	}
	return out
}

func all[T any](s []T, ok func(T) bool) bool {
	for _, x := range s {
		if !ok(x) {
			return false
		}
	}
	return true
}

// cleanBackends reports whether backends need no normalizing: named,
// sorted by strictly increasing name (so no duplicates), every address
// usable.
func cleanBackends(backends []Backend) bool {
	for i, b := range backends {
		if b.Node == "" || (i > 0 && backends[i-1].Node >= b.Node) || !all(b.Addrs, validUnicast) {
			return false
		}
	}
	return true
}

// normalizeBackends drops unnamed and repeated backends and unusable
// addresses, and sorts by name; it reports each problem with bad.
func normalizeBackends(backends []Backend, bad func(format string, args ...any)) []Backend {
	seenNodes := make(map[string]bool, len(backends))
	out := make([]Backend, 0, len(backends))
	for _, b := range backends {
		switch {
		case b.Node == "":
			bad("backend with an empty node name")
		case seenNodes[b.Node]:
			bad("backend %q listed more than once", b.Node)
		default:
			seenNodes[b.Node] = true
			// Copied only when an address must go: this runs for every
			// backend of every service on every sync.
			addrs := b.Addrs
			if !all(addrs, validUnicast) {
				addrs = slices.DeleteFunc(slices.Clone(b.Addrs), func(a netip.Addr) bool {
					ok := validUnicast(a)
					if !ok {
						bad("backend %q: unusable address %q", b.Node, a)
					}
					return !ok
				})
			}
			out = append(out, Backend{Node: b.Node, Addrs: addrs, Healthy: b.Healthy})
		}
	}
	slices.SortFunc(out, func(a, b Backend) int { return strings.Compare(a.Node, b.Node) })
	return out
}

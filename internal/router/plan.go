package router

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
)

// Placement says which Route objects a router programs.
type Placement string

const (
	// PlacementNode: on a node, every route but those to its own pod CIDRs
	// (which the node's network plugin serves locally).
	PlacementNode Placement = "node"
	// PlacementGateway: on a router in front of the nodes, every route.
	PlacementGateway Placement = "gateway"
)

// Want is a route the host should hold: Dst via Via, for Route object Name.
type Want struct {
	Dst  netip.Prefix
	Via  netip.Addr
	Name string
}

// Problem is a Route the host should hold but will not program.
type Problem struct {
	Name    string
	Reason  string // a condition reason
	Message string
}

// Reasons of Programmed conditions.
const (
	ReasonProgrammed = "Programmed"
	// ReasonDuplicate: another Route has the same destination; neither is
	// programmed until one is deleted.
	ReasonDuplicate = "DuplicateDestination"
	// ReasonInvalid: the spec does not parse (the CRD's validation should
	// have refused it).
	ReasonInvalid = "InvalidSpec"
	// ReasonConflict: a route to the destination that is not ours exists.
	ReasonConflict = "RouteConflict"
	// ReasonFailed: the kernel refused the route (an unreachable next hop,
	// say).
	ReasonFailed = "ProgrammingFailed"
)

// Select returns the routes a host with placement p should hold, sorted by
// destination, and the Routes it should hold but cannot. self is the
// host's node name (required for PlacementNode, optional for a gateway
// that is also a node). Routes not for this host are in neither list.
func Select(objs []*v1alpha1.Route, p Placement, self string) ([]Want, []Problem) {
	var wants []Want
	var problems []Problem
	for _, o := range objs {
		if self != "" && o.Spec.NodeName == self {
			continue
		}
		dst, err1 := netip.ParsePrefix(o.Spec.DestinationCIDR)
		via, err2 := netip.ParseAddr(o.Spec.NextHop)
		switch {
		case err1 != nil || err2 != nil || dst != dst.Masked():
			problems = append(problems, Problem{Name: o.Name, Reason: ReasonInvalid,
				Message: fmt.Sprintf("destination %q or next hop %q does not parse", o.Spec.DestinationCIDR, o.Spec.NextHop)})
		case dst.Addr().Is4() != via.Unmap().Is4():
			problems = append(problems, Problem{Name: o.Name, Reason: ReasonInvalid,
				Message: fmt.Sprintf("next hop %s is not of the family of %s", via, dst)})
		default:
			wants = append(wants, Want{Dst: dst, Via: via.Unmap(), Name: o.Name})
		}
	}
	slices.SortFunc(wants, func(a, b Want) int {
		return cmp.Or(comparePrefix(a.Dst, b.Dst), cmp.Compare(a.Name, b.Name))
	})
	// Two Routes with one destination: program neither (a node's CIDR
	// handed to another node while the first's Route is still there is
	// resolved by the route controller within one reconcile).
	var unique []Want
	for i := 0; i < len(wants); {
		j := i + 1
		for j < len(wants) && wants[j].Dst == wants[i].Dst {
			j++
		}
		if j-i == 1 {
			unique = append(unique, wants[i])
		} else {
			for _, w := range wants[i:j] {
				problems = append(problems, Problem{Name: w.Name, Reason: ReasonDuplicate,
					Message: fmt.Sprintf("%d Routes have destination %s; none is programmed", j-i, w.Dst)})
			}
		}
		i = j
	}
	slices.SortFunc(problems, func(a, b Problem) int { return cmp.Compare(a.Name, b.Name) })
	return unique, problems
}

// Installed is a route of ours that the kernel holds.
type Installed struct {
	Dst      netip.Prefix
	Via      netip.Addr // invalid for a route without a single gateway
	Priority int        // the metric; part of the route's identity
}

// Change replaces the next hop of an installed route.
type Change struct {
	Old Installed
	New Want
}

// Plan is what to change in the kernel: each slice sorted by destination.
type Plan struct {
	Add     []Want      // absent: add, never replacing a route of another protocol
	Replace []Change    // ours, with another next hop
	Delete  []Installed // ours, no longer wanted, or a second one to a wanted destination
}

// Empty reports whether there is nothing to do.
func (p Plan) Empty() bool { return len(p.Add)+len(p.Replace)+len(p.Delete) == 0 }

// Diff returns what turns have (the kernel's routes of ours) into want.
// A destination held twice (another metric, say) keeps one route.
func Diff(want []Want, have []Installed) Plan {
	byDst := map[netip.Prefix][]Installed{}
	for _, h := range have {
		byDst[h.Dst] = append(byDst[h.Dst], h)
	}
	var p Plan
	wanted := map[netip.Prefix]bool{}
	for _, w := range want {
		wanted[w.Dst] = true
		inst := byDst[w.Dst]
		if len(inst) == 0 {
			p.Add = append(p.Add, w)
			continue
		}
		keep := slices.IndexFunc(inst, func(i Installed) bool { return i.Via == w.Via })
		if keep < 0 {
			keep = 0
			p.Replace = append(p.Replace, Change{Old: inst[0], New: w})
		}
		for i, extra := range inst {
			if i != keep {
				p.Delete = append(p.Delete, extra)
			}
		}
	}
	for _, h := range have {
		if !wanted[h.Dst] {
			p.Delete = append(p.Delete, h)
		}
	}
	slices.SortFunc(p.Delete, func(a, b Installed) int {
		return cmp.Or(comparePrefix(a.Dst, b.Dst), cmp.Compare(a.Priority, b.Priority), a.Via.Compare(b.Via))
	})
	return p
}

// comparePrefix orders IPv4 before IPv6, then by address and length.
func comparePrefix(a, b netip.Prefix) int {
	return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
}

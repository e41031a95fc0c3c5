package netlab

import (
	"context"
	"fmt"
	"net/netip"
)

// Topology is what the test beds built on a lab (test/framework/apionly
// and test/framework/realcluster) have in common: the lab's name and
// subnets, its load-balancer hosts and client hosts, the ranges of pool
// "default", and an optional link from the machine's shell. Zero values
// take the defaults noted; WithDefaults fills them in.
type Topology struct {
	// Prefix names the lab's namespaces (default: a fresh one).
	Prefix string
	// Subnet4 and Subnet6 are the lab's (default DefaultSubnet4 and
	// DefaultSubnet6); Pool4 and Pool6 the address ranges of pool
	// "default" (default: .200-.219 and ::c8-::db of the subnets).
	Subnet4, Subnet6 netip.Prefix
	Pool4, Pool6     string
	// LBHosts is how many load-balancer hosts there are (default 1),
	// named lb-N.
	LBHosts int
	// Clients are hosts that are not nodes, by name (default "client").
	Clients []string
	// RootLink names a veth that joins the machine's root namespace to the
	// lab, so that the machine's shell reaches the virtual IPs (the
	// sandbox); empty: no link (tests).
	RootLink string
}

// WithDefaults returns t with its zero values replaced by the defaults.
func (t Topology) WithDefaults() Topology {
	if t.LBHosts == 0 {
		t.LBHosts = 1
	}
	if t.Clients == nil {
		t.Clients = []string{"client"}
	}
	if !t.Subnet4.IsValid() {
		t.Subnet4 = DefaultSubnet4
	}
	if !t.Subnet6.IsValid() {
		t.Subnet6 = DefaultSubnet6
	}
	if t.Pool4 == "" {
		t.Pool4 = RangeIn(t.Subnet4, 200, 219)
	}
	if t.Pool6 == "" {
		t.Pool6 = RangeIn(t.Subnet6, 200, 219)
	}
	return t
}

// NewLab makes the lab of t, with no hosts yet.
func (t Topology) NewLab(ctx context.Context) (*Lab, error) {
	return New(ctx, Options{Prefix: t.Prefix, Subnet4: t.Subnet4, Subnet6: t.Subnet6})
}

// AddClients adds t's client hosts to l and then, when t asks for it, the
// root link. Test beds add their nodes first, so that hosts get their
// addresses in one order: load-balancer hosts and nodes, then clients.
// unlink, when not nil, removes the root link; it must run before the lab
// closes.
func (t Topology) AddClients(ctx context.Context, l *Lab) (clients map[string]*Host, unlink func() error, err error) {
	clients = make(map[string]*Host, len(t.Clients))
	for _, name := range t.Clients {
		h, err := l.AddHost(ctx, name, HostOptions{})
		if err != nil {
			return nil, nil, err
		}
		clients[name] = h
	}
	if t.RootLink != "" {
		if err := l.LinkRoot(ctx, t.RootLink); err != nil {
			return nil, nil, err
		}
		link := t.RootLink
		unlink = func() error { return UnlinkRoot(link) }
	}
	return clients, unlink, nil
}

// RangeIn is the range "first-last" of host numbers first..last in a
// subnet.
func RangeIn(p netip.Prefix, first, last int) string {
	return fmt.Sprintf("%s-%s", Nth(p, first), Nth(p, last))
}

// Nth is the address n after a subnet's first.
func Nth(p netip.Prefix, n int) netip.Addr {
	a := p.Masked().Addr()
	for range n {
		a = a.Next()
	}
	return a
}

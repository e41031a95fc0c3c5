package dataplane

import (
	"context"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/knftables"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, addr(s))
	}
	return out
}

func newService(name string, mods ...func(*Service)) Service {
	s := Service{Name: name}
	for _, m := range mods {
		m(&s)
	}
	return s
}

func withVIPs(vips ...string) func(*Service) {
	return func(s *Service) { s.VIPs = append(s.VIPs, addrs(vips...)...) }
}

func withPort(proto Protocol, port, nodePort uint16) func(*Service) {
	return func(s *Service) {
		s.Ports = append(s.Ports, Port{Name: strings.ToLower(string(proto)), Protocol: proto, Port: port, NodePort: nodePort})
	}
}

func withBackend(node string, healthy bool, ips ...string) func(*Service) {
	return func(s *Service) {
		s.Backends = append(s.Backends, Backend{Node: node, Addrs: addrs(ips...), Healthy: healthy})
	}
}

// withRouted marks the service's VIPs as routed to the host (BGP), not
// held on its interface.
func withRouted() func(*Service) { return func(s *Service) { s.Routed = true } }

func withAffinity() func(*Service) { return func(s *Service) { s.Affinity = true } }

func withSourceRanges(prefixes ...string) func(*Service) {
	return func(s *Service) {
		for _, p := range prefixes {
			s.SourceRanges = append(s.SourceRanges, netip.MustParsePrefix(p))
		}
	}
}

// Nodes of the test state: node-c has no IPv6 address.
var (
	nodeA = []string{"192.0.2.11", "2001:db8::11"}
	nodeB = []string{"192.0.2.12", "2001:db8::12"}
	nodeC = []string{"192.0.2.13"}
)

// realisticState has TCP and UDP, IPv4 and IPv6, ClientIP affinity, source
// ranges and a service without a healthy backend.
func realisticState() State {
	return State{Services: []Service{
		newService("shop/web", withVIPs("192.0.2.100", "2001:db8::100"),
			withPort(TCP, 80, 30080), withPort(TCP, 443, 30443),
			withBackend("node-a", true, nodeA...), withBackend("node-b", true, nodeB...), withBackend("node-c", true, nodeC...)),
		newService("infra/dns", withVIPs("192.0.2.101", "2001:db8::101"),
			withPort(UDP, 53, 30053), withPort(TCP, 53, 30054), withAffinity(),
			withBackend("node-a", true, nodeA...), withBackend("node-b", true, nodeB...)),
		newService("shop/admin", withVIPs("192.0.2.102"),
			withPort(TCP, 8443, 30843), withSourceRanges("198.51.100.0/24", "203.0.113.7/32", "2001:db8:ffff::/48"),
			withBackend("node-a", true, nodeA...), withBackend("node-b", true, nodeB...)),
		newService("shop/broken", withVIPs("192.0.2.103", "2001:db8::103"),
			withPort(TCP, 80, 30081), withPort(UDP, 5000, 30500),
			withBackend("node-a", false, nodeA...)),
	}}
}

// withHealth returns s with node's health set in every service.
func withHealth(s State, node string, healthy bool) State {
	out := State{}
	for _, svc := range s.Services {
		svc.Backends = append([]Backend(nil), svc.Backends...)
		for i := range svc.Backends {
			if svc.Backends[i].Node == node {
				svc.Backends[i].Healthy = healthy
			}
		}
		out.Services = append(out.Services, svc)
	}
	return out
}

// recordingConntrack is a Conntrack that remembers what it was asked.
type recordingConntrack struct {
	deleted [][]Flow
	err     error
}

func (r *recordingConntrack) DeleteUDPFlows(_ context.Context, flows []Flow) error {
	r.deleted = append(r.deleted, flows)
	return r.err
}

func newFakeSyncer() (*Syncer, *knftables.Fake, *knftables.Fake, *recordingConntrack) {
	v4 := knftables.NewFake(knftables.IPv4Family, TableName)
	v6 := knftables.NewFake(knftables.IPv6Family, TableName)
	ct := &recordingConntrack{}
	return NewSyncer(v4, v6, nil, ct), v4, v6, ct
}

// transactions returns the last transaction of each fake, labelled.
func transactions(v4, v6 *knftables.Fake) string {
	var b strings.Builder
	for _, f := range []*knftables.Fake{v4, v6} {
		if f.LastTransaction != nil {
			b.WriteString(f.LastTransaction.String())
		}
	}
	return b.String()
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got; run with -update if intended):\n%s", path, diff)
	}
}

// bucketTexts is the value of each bucket of the bucket map m in nft
// syntax, "" for no element.
func bucketTexts(m *Map) []string {
	out := make([]string, BucketCount)
	for i, c := range m.Buckets.Index {
		if c != 0 {
			out[i] = m.Buckets.text(i)
		}
	}
	return out
}

// expand is the Assignment that a compact one stands for.
func expand(index *[BucketCount]uint8, choices *BucketChoices) Assignment {
	var a Assignment
	for i, c := range index {
		if c != 0 {
			a[i] = choices.Nodes[c-1]
		}
	}
	return a
}

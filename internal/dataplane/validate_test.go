package dataplane

import (
	"net/netip"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/knftables"
)

// TestProblems: the problems of each service, by name, and which are
// conflicts with another service.
func TestProblems(t *testing.T) {
	got := Problems(State{Services: []Service{
		newService("b/second", withVIPs("192.0.2.100", "224.0.0.1"), withPort(TCP, 80, 1), withPort(TCP, 81, 2)),
		newService("a/first", withVIPs("192.0.2.100"), withPort(TCP, 80, 3)),
		newService(""),
	}})
	type problem struct {
		Conflict bool
		Msg      string
	}
	flat := map[string][]problem{}
	for name, ps := range got {
		for _, p := range ps {
			if p.Service != name {
				t.Errorf("problem of %q listed under %q", p.Service, name)
			}
			flat[name] = append(flat[name], problem{p.Conflict, p.Err.Error()})
		}
	}
	want := map[string][]problem{"b/second": {
		{false, `unusable VIP "224.0.0.1"`},
		{true, `192.0.2.100 TCP/80 is already used by service "a/first"`},
	}}
	if diff := cmp.Diff(want, flat); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

func TestValidate(t *testing.T) {
	ok := func(mods ...func(*Service)) Service {
		return newService("ns/ok", append([]func(*Service){withVIPs("192.0.2.100"), withPort(TCP, 80, 30080),
			withBackend("node-a", true, nodeA...)}, mods...)...)
	}
	for _, tc := range []struct {
		name     string
		services []Service
		want     []string // substrings of the error, one per problem
	}{
		{"valid", []Service{ok()}, nil},
		{"empty name", []Service{newService("")}, []string{"empty name"}},
		{"duplicate service", []Service{ok(), ok()}, []string{`"ns/ok": listed more than once`}},
		{"bad protocol and ports", []Service{ok(func(s *Service) {
			s.Ports = append(s.Ports, Port{Name: "x", Protocol: "SCTP", Port: 1, NodePort: 2}, Port{Name: "y", Protocol: TCP, Port: 81})
		}, withPort(TCP, 80, 30081))}, []string{`unsupported protocol "SCTP"`, "port and nodePort must be set", "port TCP/80 listed more than once"}},
		{"bad VIPs", []Service{ok(func(s *Service) {
			s.VIPs = append(s.VIPs, netip.Addr{}, addr("::ffff:192.0.2.1"), addr("224.0.0.1"))
		})}, []string{`unusable VIP "invalid IP"`, `unusable VIP "::ffff:192.0.2.1"`, `unusable VIP "224.0.0.1"`}},
		{"bad backends", []Service{ok(withBackend("", true), withBackend("node-a", true), func(s *Service) {
			s.Backends = append(s.Backends, Backend{Node: "node-x", Addrs: []netip.Addr{{}}})
		})}, []string{"backend with an empty node name", `backend "node-a" listed more than once`, `backend "node-x": unusable address`}},
		{"bad source range", []Service{ok(func(s *Service) { s.SourceRanges = []netip.Prefix{{}} })}, []string{"matches no client"}},
		{"VIP and port taken", []Service{
			newService("b/second", withVIPs("192.0.2.100"), withPort(TCP, 80, 1), withPort(TCP, 81, 2)),
			newService("a/first", withVIPs("192.0.2.100"), withPort(TCP, 80, 3)),
		}, []string{`service "b/second": 192.0.2.100 TCP/80 is already used by service "a/first"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(State{Services: tc.services})
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate found nothing, want %q", tc.want)
			}
			if got := strings.Count(err.Error(), "\n") + 1; got != len(tc.want) {
				t.Errorf("got %d problems, want %d:\n%v", got, len(tc.want), err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

// One bad or clashing service never keeps the others from being programmed.
func TestDesiredSkipsOnlyTheBadParts(t *testing.T) {
	st := State{Services: []Service{
		newService("b/second", withVIPs("192.0.2.100"), withPort(TCP, 80, 1), withPort(TCP, 81, 2),
			withBackend("node-a", true, nodeA...)),
		newService("a/first", withVIPs("192.0.2.100"), withPort(TCP, 80, 3), withBackend("node-a", true, nodeA...)),
		newService("c/badport", withVIPs("192.0.2.101"), withPort("SCTP", 80, 3), withPort(UDP, 80, 4),
			withBackend("node-a", true, nodeA...)),
	}}
	ports := Desired(st).IPv4.Maps[mapServicePorts].Elements
	want := map[string]string{
		"192.0.2.100 . tcp . 80": "goto " + serviceChainName("a/first", Port{Protocol: TCP, Port: 80}),
		"192.0.2.100 . tcp . 81": "goto " + serviceChainName("b/second", Port{Protocol: TCP, Port: 81}),
		"192.0.2.101 . udp . 80": "goto " + serviceChainName("c/badport", Port{Protocol: UDP, Port: 80}),
	}
	if len(ports) != len(want) {
		t.Errorf("service-ports has %d elements, want %d: %v", len(ports), len(want), ports)
	}
	for k, v := range want {
		if got := strings.Join(ports[k].Value, " "); got != v {
			t.Errorf("service-ports[%s] = %q, want %q", k, got, v)
		}
	}
}

// An invalid source range must not open the service to everyone.
func TestInvalidSourceRangesDropEverything(t *testing.T) {
	st := State{Services: []Service{newService("ns/svc", withVIPs("192.0.2.100", "2001:db8::100"),
		withPort(TCP, 80, 30080), withBackend("node-a", true, nodeA...),
		func(s *Service) { s.SourceRanges = []netip.Prefix{{}} })}}
	tr, _ := syncedTracer(t, st)
	for _, p := range []packet{tcp("198.51.100.7", 1, "192.0.2.100", 80), tcp("2001:db8:1::7", 1, "2001:db8::100", 80)} {
		if v := tr.run(p); v.action != "drop" {
			t.Errorf("%v: %v, want drop", p, v)
		}
	}
}

func TestSourceRangesAreMinimal(t *testing.T) {
	got := minimalPrefixes([]netip.Prefix{
		netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("192.0.2.0/25"), netip.MustParsePrefix("192.0.2.128/25"), netip.MustParsePrefix("2001:db8::/32"),
		netip.MustParsePrefix("2001:db8:1::/48"),
	})
	want := "[10.0.0.0/8 192.0.2.0/25 192.0.2.128/25 2001:db8::/32]"
	if s := fmtPrefixes(got); s != want {
		t.Errorf("minimalPrefixes = %s, want %s", s, want)
	}
}

func fmtPrefixes(ps []netip.Prefix) string {
	var ss []string
	for _, p := range ps {
		ss = append(ss, p.String())
	}
	return "[" + strings.Join(ss, " ") + "]"
}

func TestChainNamesAreValidAndUnique(t *testing.T) {
	p := Port{Protocol: TCP, Port: 80}
	long := strings.Repeat("x", 1000)
	names := map[string]bool{}
	for _, svc := range []string{"ns/web", "ns/web\"; flush ruleset", "ns/wéb", "ns/w_b", long, long + "y", "1ns/web"} {
		for _, name := range []string{serviceChainName(svc, p), firewallChainName(svc)} {
			if len(name) >= knftables.NameLengthMax {
				t.Errorf("name of %.20q is %d long", svc, len(name))
			}
			if strings.ContainsFunc(name, func(r rune) bool {
				return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/-_.", r))
			}) {
				t.Errorf("name %q has characters nft does not take unquoted", name)
			}
			if names[name] {
				t.Errorf("name %q used twice", name)
			}
			names[name] = true
		}
	}
}

func TestCheckHost(t *testing.T) {
	good := fstest.MapFS{
		"net/ipv4/ip_forward":                  {Data: []byte("1\n")},
		"net/ipv6/conf/all/forwarding":         {Data: []byte("1\n")},
		"net/netfilter/nf_conntrack_tcp_loose": {Data: []byte("1\n")},
	}
	if err := checkHost(good); err != nil {
		t.Errorf("checkHost(good) = %v", err)
	}
	bad := fstest.MapFS{
		"net/ipv4/ip_forward":                  {Data: []byte("0\n")},
		"net/netfilter/nf_conntrack_tcp_loose": {Data: []byte("0\n")},
	}
	err := checkHost(bad)
	for _, want := range []string{"net.ipv4.ip_forward is 0, must be 1", "read net.ipv6.conf.all.forwarding", "nf_conntrack_tcp_loose is 0"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("checkHost(bad) = %v, want it to say %q", err, want)
		}
	}
	if err := checkHost(bad, knftables.IPv6Family); err == nil || strings.Contains(err.Error(), "ip_forward") {
		t.Errorf("checkHost(bad, ip6) = %v, want only IPv6 and conntrack problems", err)
	}
	delete(good, "net/netfilter/nf_conntrack_tcp_loose")
	if err := checkHost(good); err != nil {
		t.Errorf("checkHost without nf_conntrack loaded = %v, want nil", err)
	}
}

// TestValidateNodePortOnlyForProxy: a port with no node port (a Service
// with allocateLoadBalancerNodePorts false) is valid in passthrough
// forwarding, which hands the packet to a node's kube-proxy unchanged, and
// a problem in proxy forwarding, which DNATs to it.
func TestValidateNodePortOnlyForProxy(t *testing.T) {
	noNodePort := func(fwd Forwarding) Service {
		return newService("ns/s", withVIPs("192.0.2.100"), withPort(TCP, 80, 0), withBackend("node-a", true, nodeA...),
			func(s *Service) { s.Forwarding = fwd })
	}
	st := State{Interface: "eth0", Services: []Service{noNodePort(Passthrough)}}
	if err := Validate(st); err != nil {
		t.Errorf("passthrough without a node port: %v", err)
	}
	st.Services = []Service{noNodePort(Proxy)}
	if err := Validate(st); err == nil || !strings.Contains(err.Error(), "only passthrough forwarding needs no nodePort") {
		t.Errorf("proxy without a node port: %v, want a problem", err)
	}
}

package config

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// cmpConfig compares Configs; netip.Addr has unexported fields.
var cmpConfig = cmp.Options{
	cmpopts.EquateComparable(netip.Addr{}),
	cmp.Comparer(func(a, b labels.Selector) bool { return a.String() == b.String() }),
}

var defaultHealthCheck = ClusterHealthCheck{Kind: HealthCheckHTTP, Port: 10256, Path: "/healthz"}

func newConfig(opts ...func(*Config)) *Config {
	c := &Config{Global: Global{Region: "eu", ClusterHealthCheck: defaultHealthCheck,
		BMCOutOfService: OutOfServiceOff, BMCOutOfServiceGrace: DefaultOutOfServiceGrace,
		BMCFence: FenceOff, BMCFenceAfter: DefaultFenceAfter}, Machines: map[string]*Machine{}}
	for _, o := range opts {
		o(c)
	}
	return c
}

func withMachines(ms ...*Machine) func(*Config) {
	return func(c *Config) {
		for _, m := range ms {
			c.Machines[m.Name] = m
		}
	}
}

func withPools(ps ...*Pool) func(*Config) {
	return func(c *Config) { c.Pools = append(c.Pools, ps...) }
}

func authoritative(c *Config) { c.Global.AuthoritativeInventory = true }

// newMachine is a machine with the defaults of a file whose region is "eu".
func newMachine(name string, opts ...func(*Machine)) *Machine {
	m := &Machine{Name: name, Region: "eu", State: StateRunning}
	for _, o := range opts {
		o(m)
	}
	return m
}

func withZone(z string) func(*Machine)        { return func(m *Machine) { m.Zone = z } }
func withRegion(r string) func(*Machine)      { return func(m *Machine) { m.Region = r } }
func withType(t string) func(*Machine)        { return func(m *Machine) { m.InstanceType = t } }
func withState(s MachineState) func(*Machine) { return func(m *Machine) { m.State = s } }
func withBMC(b BMC) func(*Machine)            { return func(m *Machine) { m.BMC = &b } }
func withAddress(t corev1.NodeAddressType, a string) func(*Machine) {
	return func(m *Machine) { m.Addresses = append(m.Addresses, corev1.NodeAddress{Type: t, Address: a}) }
}

func withLabel(k, v string) func(*Machine) {
	return func(m *Machine) {
		if m.Labels == nil {
			m.Labels = map[string]string{}
		}
		m.Labels[k] = v
	}
}

// newPool is a pool with the defaults.
func newPool(name string, opts ...func(*Pool)) *Pool {
	p := &Pool{Name: name, AutoAssign: true, Forwarding: ForwardingPassthrough, AddressConflict: AddressConflictKeep, Announce: AnnounceL2, Hosts: labels.Everything()}
	for _, o := range opts {
		o(p)
	}
	return p
}

func withRange(first, last string) func(*Pool) {
	return func(p *Pool) {
		p.Ranges = append(p.Ranges, AddrRange{netip.MustParseAddr(first), netip.MustParseAddr(last)})
	}
}

func withNamespaces(ns ...string) func(*Pool) {
	return func(p *Pool) { p.Namespaces = append(p.Namespaces, ns...) }
}

func manualOnly(p *Pool) { p.AutoAssign = false }

func crossNamespace(p *Pool) { p.AllowCrossNamespaceSharing = true }

func proxyForwarding(p *Pool) { p.Forwarding = ForwardingProxy }

func TestParseGood(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want *Config
	}{
		{
			name: "only the required key",
			in:   "[Global]\nregion = eu\n",
			want: newConfig(),
		},
		{
			name: "no trailing newline",
			in:   "[Global]\nregion = eu",
			want: newConfig(),
		},
		{
			name: "defaults applied",
			in: `[Global]
region = eu
[Machine "web-1"]
[Pool "public"]
addresses = 192.0.2.0/28
`,
			want: newConfig(
				withMachines(newMachine("web-1")),
				withPools(newPool("public", withRange("192.0.2.0", "192.0.2.15"))),
			),
		},
		{
			name: "a BMC with its defaults, and one with every key",
			in: `[Global]
region = eu
[Machine "web-1"]
bmc-url = https://10.0.9.1/
bmc-insecure-skip-verify
[Machine "web-2"]
bmc-url = https://[fd00::9]:8443
bmc-system = System.Embedded.1
bmc-username-file = /s/user
bmc-password-file = /s/pass
bmc-ca-file = /s/ca.pem
bmc-timeout = 2s
bmc-poll-interval = 1m
`,
			want: newConfig(withMachines(
				newMachine("web-1", withBMC(BMC{URL: "https://10.0.9.1", InsecureSkipVerify: true,
					Timeout: DefaultBMCTimeout, PollInterval: DefaultBMCPollInterval})),
				newMachine("web-2", withBMC(BMC{URL: "https://[fd00::9]:8443", System: "System.Embedded.1",
					UsernameFile: "/s/user", PasswordFile: "/s/pass", CAFile: "/s/ca.pem",
					Timeout: 2 * time.Second, PollInterval: time.Minute})),
			)),
		},
		{
			name: "sharing across namespaces is off unless a pool turns it on",
			in: "[Global]\nregion = eu\n" +
				"[Pool \"a\"]\naddresses = 192.0.2.0/28\n" +
				"[Pool \"b\"]\naddresses = 192.0.2.16/28\nallow-cross-namespace-sharing\n" +
				"[Pool \"c\"]\naddresses = 192.0.2.32/28\nallow-cross-namespace-sharing = no\n",
			want: newConfig(withPools(
				newPool("a", withRange("192.0.2.0", "192.0.2.15")),
				newPool("b", withRange("192.0.2.16", "192.0.2.31"), crossNamespace),
				newPool("c", withRange("192.0.2.32", "192.0.2.47")),
			)),
		},
		{
			name: "section and key names and bool and state words in any case",
			in: `[GLOBAL]
Region = eu
AUTHORITATIVE-INVENTORY = Yes
[machine "web-1"]
ZONE = a
State = GONE
[pool "p"]
Addresses = 192.0.2.0/28
auto-ASSIGN = OFF
`,
			want: newConfig(authoritative,
				withMachines(newMachine("web-1", withZone("a"), withState(StateGone))),
				withPools(newPool("p", withRange("192.0.2.0", "192.0.2.15"), manualOnly)),
			),
		},
		{
			name: "every gcfg bool word",
			in: "[Global]\nregion = eu\nauthoritative-inventory = on\n" +
				"[Pool \"a\"]\naddresses = 10.0.0.0/24\nauto-assign = 0\n" +
				"[Pool \"b\"]\naddresses = 10.0.1.0/24\nauto-assign = no\n" +
				"[Pool \"c\"]\naddresses = 10.0.2.0/24\nauto-assign = false\n" +
				"[Pool \"d\"]\naddresses = 10.0.3.0/24\nauto-assign = 1\n" +
				"[Pool \"e\"]\naddresses = 10.0.4.0/24\nauto-assign = true\n",
			want: newConfig(authoritative, withPools(
				newPool("a", withRange("10.0.0.0", "10.0.0.255"), manualOnly),
				newPool("b", withRange("10.0.1.0", "10.0.1.255"), manualOnly),
				newPool("c", withRange("10.0.2.0", "10.0.2.255"), manualOnly),
				newPool("d", withRange("10.0.3.0", "10.0.3.255")),
				newPool("e", withRange("10.0.4.0", "10.0.4.255")),
			)),
		},
		{
			name: "forwarding per pool, passthrough by default, in any case",
			in: "[Global]\nregion = eu\n" +
				"[Pool \"a\"]\naddresses = 10.0.0.0/24\n" +
				"[Pool \"b\"]\naddresses = 10.0.1.0/24\nforwarding = Proxy\n" +
				"[Pool \"c\"]\naddresses = 10.0.2.0/24\nforwarding = passthrough\n",
			want: newConfig(withPools(
				newPool("a", withRange("10.0.0.0", "10.0.0.255")),
				newPool("b", withRange("10.0.1.0", "10.0.1.255"), proxyForwarding),
				newPool("c", withRange("10.0.2.0", "10.0.2.255")),
			)),
		},
		{
			name: "a bool key written alone means true",
			in: `[Global]
region = eu
authoritative-inventory
[Pool "p"]
addresses = 192.0.2.0/28
auto-assign ; explicitly on
`,
			want: newConfig(authoritative, withPools(newPool("p", withRange("192.0.2.0", "192.0.2.15")))),
		},
		{
			name: "addresses in file order across types, IPv6 canonical",
			in: `[Global]
region = eu
[Machine "web-1.example.net"]
hostname = web-1
internal-ip = 10.0.0.2
external-ip = 2001:DB8:0:0::0001
internal-dns = web-1.int.example.net
internal-ip = FD00::0:11
external-dns = web-1.example.net
external-ip = 203.0.113.7
`,
			want: newConfig(withMachines(newMachine("web-1.example.net",
				withAddress(corev1.NodeHostName, "web-1"),
				withAddress(corev1.NodeInternalIP, "10.0.0.2"),
				withAddress(corev1.NodeExternalIP, "2001:db8::1"),
				withAddress(corev1.NodeInternalDNS, "web-1.int.example.net"),
				withAddress(corev1.NodeInternalIP, "fd00::11"),
				withAddress(corev1.NodeExternalDNS, "web-1.example.net"),
				withAddress(corev1.NodeExternalIP, "203.0.113.7"),
			))),
		},
		{
			name: "one address both internal and external",
			in:   "[Global]\nregion = eu\n[Machine \"a\"]\ninternal-ip = 10.0.0.1\nexternal-ip = 10.0.0.1\n",
			want: newConfig(withMachines(newMachine("a",
				withAddress(corev1.NodeInternalIP, "10.0.0.1"),
				withAddress(corev1.NodeExternalIP, "10.0.0.1"),
			))),
		},
		{
			name: "machine region, zone, type, state and labels",
			in: `[Global]
region = eu
[Machine "db-1"]
region = us
zone = rack-b
instance-type = m4.xlarge
state = shutdown
label = example.com/disk=ssd
label = empty=
label = Team=DB_ops
`,
			want: newConfig(withMachines(newMachine("db-1",
				withRegion("us"), withZone("rack-b"), withType("m4.xlarge"), withState(StateShutdown),
				withLabel("example.com/disk", "ssd"), withLabel("empty", ""), withLabel("Team", "DB_ops"),
			))),
		},
		{
			name: "pools in file order with CIDRs and ranges of both families",
			in: `[Global]
region = eu
[Pool "zeta"]
addresses = 2001:db8::/120
addresses = 192.0.2.10-192.0.2.20
[Pool "alpha"]
addresses = 192.0.2.21 - 192.0.2.21
addresses = 2001:db8::100-2001:db8::1ff
addresses = 198.51.100.7/32
namespace = team-a
namespace = team-b
`,
			want: newConfig(withPools(
				newPool("zeta", withRange("2001:db8::", "2001:db8::ff"), withRange("192.0.2.10", "192.0.2.20")),
				newPool("alpha",
					withRange("192.0.2.21", "192.0.2.21"),
					withRange("2001:db8::100", "2001:db8::1ff"),
					withRange("198.51.100.7", "198.51.100.7"),
					withNamespaces("team-a", "team-b")),
			)),
		},
		{
			name: "adjacent ranges do not overlap",
			in: `[Global]
region = eu
[Pool "a"]
addresses = 192.0.2.0/28
[Pool "b"]
addresses = 192.0.2.16/28
addresses = 192.0.2.32-192.0.2.40
`,
			want: newConfig(withPools(
				newPool("a", withRange("192.0.2.0", "192.0.2.15")),
				newPool("b", withRange("192.0.2.16", "192.0.2.31"), withRange("192.0.2.32", "192.0.2.40")),
			)),
		},
		{
			name: "comments, quotes, escapes and continued lines",
			in: "# leading comment\n" +
				"; another\n" +
				"[Global] ; trailing comment\n" +
				"region = \"eu\" # quoted\n" +
				"[Machine \"web-1\"]   # comment after a header\n" +
				"zone = rack\"-\"a ; quotes inside a value are dropped\n" +
				"instance-type = c4\\\n" +
				".large\n" +
				"label = \"example.com/note=a.b\" ; a comment\n" +
				"label = \"x\"=y # quoted and unquoted parts are joined\n",
			want: newConfig(withMachines(newMachine("web-1",
				withZone("rack-a"), withType("c4.large"),
				withLabel("example.com/note", "a.b"), withLabel("x", "y")))),
		},
		{
			name: "CRLF line ends and a byte order mark",
			in:   "\ufeff[Global]\r\nregion = eu\r\n[Machine \"web-1\"]\r\nzone = a\r\n",
			want: newConfig(withMachines(newMachine("web-1", withZone("a")))),
		},
		{
			name: "machine names keep their case as map keys",
			in:   "[Global]\nregion = eu\n[Machine \"node.example.com\"]\n[Machine \"node2\"]\n",
			want: newConfig(withMachines(newMachine("node.example.com"), newMachine("node2"))),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse("cloud.conf", []byte(tc.in))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tc.want, got, cmpConfig); diff != "" {
				t.Errorf("Parse (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUnquote(t *testing.T) {
	tests := []struct {
		name, in, want string
		wantErr        bool
	}{
		{name: "plain", in: "abc", want: "abc"},
		{name: "quoted", in: `"a ; b"`, want: "a ; b"},
		{name: "quotes inside", in: `a" b "c`, want: "a b c"},
		{name: "escapes in quotes", in: `"\\ \" \n \t"`, want: "\\ \" \n \t"},
		{name: "escaped quote outside quotes", in: `a\"b`, want: `a"b`},
		{name: "continued line", in: "a\\\nb", want: "ab"},
		{name: "unknown escape", in: `"\q"`, wantErr: true},
		{name: "missing end quote", in: `"abc`, wantErr: true},
		{name: "trailing backslash", in: `abc\`, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := unquote(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("unquote(%q) error = %v, want error %v", tc.in, err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("unquote(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// problem is an expected problem: its line and a part of its message.
type problem struct {
	line int
	msg  string
}

// checkProblems checks that err lists exactly the want problems, in order.
func checkProblems(t *testing.T, err error, want []problem) {
	t.Helper()
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("Parse error = %v, want Errors", err)
	}
	got := make([]problem, len(errs))
	for i, e := range errs {
		got[i] = problem{e.Line, e.Error()}
		if i < len(want) && strings.Contains(got[i].msg, want[i].msg) {
			got[i].msg = want[i].msg // matched: show only the part that matters in a diff
		}
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(problem{})); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

func TestParseReportsEveryProblemAtOnce(t *testing.T) {
	in := `[Global]
region = eu
[Machine "web-1"]
zone = rack-a
colour = blue
internal-ip = 10.0.0.300
hostname web-1
label = topology.kubernetes.io/zone=b
[Pool "a"]
addresses = 192.0.2.0/26
[Pool "b"]
addresses = 192.0.2.32/27
auto-assign = sometimes
[Pool "c"
`
	want := []problem{
		{5, `cloud.conf:5: [Machine "web-1"] colour: unknown key`},
		{6, `cloud.conf:6: [Machine "web-1"] internal-ip: "10.0.0.300" is not an IPv4 or IPv6 address`},
		{7, `cloud.conf:7: syntax error: expected '=' after key "hostname"`},
		{8, `cloud.conf:8: [Machine "web-1"] label: label key "topology.kubernetes.io/zone" is set by the cloud-node controller`},
		{12, `cloud.conf:12: [Pool "b"] addresses: 192.0.2.32/27 overlaps 192.0.2.0/26 of [Pool "a"] on line 10`},
		{13, `cloud.conf:13: [Pool "b"] auto-assign: "sometimes" is not a bool`},
		{14, `cloud.conf:14: syntax error: expected ']' to close the section header`},
		{14, `cloud.conf:14: [Pool "c"] addresses: required, but not given`},
	}
	_, err := Parse("cloud.conf", []byte(in))
	checkProblems(t, err, want)
	if got := strings.Count(err.Error(), "\n") + 1; got != len(want) {
		t.Errorf("err.Error() has %d lines, want one per problem (%d):\n%s", got, len(want), err)
	}
}

func TestErrorFormat(t *testing.T) {
	tests := []struct {
		name string
		err  *Error
		want string
	}{
		{
			name: "key in a named section",
			err:  &Error{File: "cloud.conf", Line: 12, Section: `Machine "web-1"`, Key: "zone", Msg: "must not be empty"},
			want: `cloud.conf:12: [Machine "web-1"] zone: must not be empty`,
		},
		{
			name: "section only",
			err:  &Error{File: "cloud.conf", Line: 3, Section: "Global", Msg: "m"},
			want: "cloud.conf:3: [Global]: m",
		},
		{
			name: "whole file",
			err:  &Error{File: "cloud.conf", Msg: "m"},
			want: "cloud.conf: m",
		},
		{
			name: "no file name",
			err:  &Error{Line: 4, Msg: "m"},
			want: "line 4: m",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.want {
				t.Errorf("Error() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestErrorsAs(t *testing.T) {
	_, err := Parse("c", []byte("[Global]\nregion = eu\nzone = a\n"))
	var one *Error
	if !errors.As(err, &one) || one.Line != 3 || one.Key != "zone" {
		t.Errorf("errors.As(*Error) = %+v, want the unknown key on line 3", one)
	}
}

func TestLookups(t *testing.T) {
	cfg, err := Parse("c", []byte(exampleConfig))
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := cfg.Machine("web-1"); !ok || m.Zone != "rack-a" {
		t.Errorf(`Machine("web-1") = %v, %v`, m, ok)
	}
	if _, ok := cfg.Machine("nope"); ok {
		t.Error(`Machine("nope") found a machine`)
	}
	p, ok := cfg.Pool("office")
	if !ok {
		t.Fatal(`Pool("office") not found`)
	}
	for _, tc := range []struct {
		ns   string
		want bool
	}{{"intranet", true}, {"tools", true}, {"default", false}} {
		if got := p.AllowsNamespace(tc.ns); got != tc.want {
			t.Errorf("AllowsNamespace(%q) = %v, want %v", tc.ns, got, tc.want)
		}
	}
	if !p.Contains(netip.MustParseAddr("192.168.50.149")) || p.Contains(netip.MustParseAddr("192.168.50.150")) {
		t.Error("office pool should hold exactly 192.168.50.100-192.168.50.149")
	}
	pub, _ := cfg.Pool("public")
	if !pub.AllowsNamespace("anything") {
		t.Error("a pool without namespaces should allow every namespace")
	}
	if _, ok := cfg.Pool("nope"); ok {
		t.Error(`Pool("nope") found a pool`)
	}
}

package config

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

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
	c := &Config{Global: Global{Region: "eu", ClusterHealthCheck: defaultHealthCheck}, Machines: map[string]*Machine{}}
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
	p := &Pool{Name: name, AutoAssign: true, Forwarding: ForwardingPassthrough, Announce: AnnounceL2, Hosts: labels.Everything()}
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

func TestParseBad(t *testing.T) {
	const global = "[Global]\nregion = eu\n" // lines 1-2 of most cases
	tests := []struct {
		name string
		in   string
		want []problem
	}{
		// Syntax.
		{
			name: "empty file",
			in:   "",
			want: []problem{{0, "no [Global] section"}},
		},
		{
			name: "key before any section",
			in:   "region = eu\n" + global,
			want: []problem{{1, `syntax error: key "region" comes before any section header`}},
		},
		{
			name: "missing closing bracket still opens the section",
			in:   global + "[Machine \"web-1\"\nzoen = a\n",
			want: []problem{
				{3, "syntax error: expected ']'"},
				{4, "unknown key (did you mean zone?)"},
			},
		},
		{
			name: "unreadable header drops its section quietly",
			in:   global + "[]\nzoen = a\n[Machine \"web-1\n",
			want: []problem{
				{3, "syntax error: expected a section name"},
				{5, "syntax error: string not terminated"},
			},
		},
		{
			name: "text after a header",
			in:   global + "[Machine \"web-1\"] zone = a\nzone = b\n",
			want: []problem{{3, "syntax error: unexpected text after ']'"}},
		},
		{
			name: "dotted section name",
			in:   global + "[Machine.web-1]\n",
			want: []problem{{3, "syntax error: illegal character U+002E '.'"}},
		},
		{
			name: "missing equals sign",
			in:   global + "[Machine \"web-1\"]\nzone rack-a\n",
			want: []problem{{4, `syntax error: expected '=' after key "zone"`}},
		},
		{
			name: "line that is neither header nor key",
			in:   global + "= a\n\"x\" = y\n",
			want: []problem{
				{3, "syntax error: expected a section header such as [Global] or a key = value line"},
				{4, "syntax error: expected a section header"},
			},
		},
		{
			name: "underscore in a key",
			in:   global + "[Machine \"web-1\"]\ninstance_type = a\n",
			want: []problem{{4, "syntax error: illegal character U+005F '_'"}},
		},
		{
			name: "bad escapes and quotes in values",
			in:   global + "[Machine \"web-1\"]\nzone = \"a\\qb\"\ninstance-type = \"abc\nhostname = a\\b\n",
			want: []problem{
				{4, "syntax error: unknown escape sequence"},
				{5, "syntax error: string not terminated"},
				{6, `syntax error: unquoted '\' must be followed by new line or double quote`},
			},
		},
		{
			name: "comment characters in quotes are part of the value",
			in:   global + "[Machine \"web-1\"]\nzone = \"a;b\" ; c\ninstance-type = \"a#b\"\n",
			want: []problem{
				{4, `"a;b" is not a valid label value`},
				{5, `"a#b" is not a valid label value`},
			},
		},
		{
			name: "one syntax error per line",
			in:   global + "[Machine \"web-1\"]\n_ _ _ = \x00\n",
			want: []problem{{4, "syntax error: illegal character U+005F '_'"}},
		},
		{
			name: "NUL and invalid UTF-8",
			in:   global + "[Machine \"web-1\"]\nzone = a\x00\ninstance-type = b\xff\n",
			want: []problem{
				{4, "syntax error: illegal character NUL"},
				{5, "syntax error: illegal UTF-8 encoding"},
			},
		},
		{
			name: "an error at the start of a line does not drop the line before",
			in:   "[Global]\nregion = eu\n\x00\n",
			want: []problem{{3, "syntax error: illegal character NUL"}},
		},
		{
			name: "empty section name",
			in:   global + "[Machine \"\"]\nzoen = a\n",
			want: []problem{{3, `syntax error: empty section name ""`}},
		},

		// Sections.
		{
			name: "unknown section with a suggestion",
			in:   global + "[Machines \"web-1\"]\nzone = a\n",
			want: []problem{{3, `unknown section [Machines] (did you mean Machine?); the sections are [Global], [Machine "name"], [Pool "name"], [BGPPeer "name"] and [Routes]`}},
		},
		{
			name: "unknown section without a suggestion",
			in:   global + "[Foo]\n",
			want: []problem{{3, "unknown section [Foo]; the sections are"}},
		},
		{
			name: "Global with a name",
			in:   "[Global \"x\"]\nregion = eu\n",
			want: []problem{
				{0, "no [Global] section"},
				{1, "this section takes no name; write [Global]"},
			},
		},
		{
			name: "Global twice",
			in:   global + "[global]\nregion = us\n",
			want: []problem{{3, "section given twice, here and on line 1"}},
		},
		{
			name: "Global without region",
			in:   "; nothing\n[Global]\nauthoritative-inventory = true\n",
			want: []problem{{2, "required, but not given"}},
		},
		{
			name: "machine without a name, whose keys are still checked",
			in:   global + "[Machine]\nzone = a\nzone = b\n",
			want: []problem{
				{3, `this section needs a name: [Machine "name"]`},
				{5, "given twice, here and on line 4"},
			},
		},
		{
			name: "machine names must be node names",
			in:   global + "[Machine \"Web_1\"]\n[Machine \"web-1.\"]\n",
			want: []problem{
				{3, `"Web_1" is not a valid machine name: a lowercase RFC 1123 subdomain`},
				{4, `"web-1." is not a valid machine name`},
			},
		},
		{
			name: "machine twice names both lines",
			in:   global + "[Machine \"web-1\"]\nzone = a\n[Machine \"web-1\"]\nzone = b\n",
			want: []problem{{5, "section given twice, here and on line 3; merge them into one"}},
		},
		{
			name: "pool names must be DNS labels",
			in:   global + "[Pool \"a.b\"]\naddresses = 192.0.2.0/28\n[Pool \"a\"]\naddresses = 192.0.2.0/28\n",
			want: []problem{{3, `"a.b" is not a valid pool name: must not contain dots`}},
		},
		{
			name: "pool twice",
			in:   global + "[Pool \"a\"]\naddresses = 192.0.2.0/28\n[Pool \"a\"]\naddresses = 198.51.100.0/28\n",
			want: []problem{{5, "section given twice, here and on line 3"}},
		},
		{
			name: "pool without addresses",
			in:   global + "[Pool \"a\"]\nnamespace = x\n",
			want: []problem{{3, "required, but not given"}},
		},

		// Keys.
		{
			name: "unknown keys list what the section has",
			in:   global + "[Machine \"web-1\"]\nzoen = a\nflavour = b\n",
			want: []problem{
				{4, "unknown key (did you mean zone?); [Machine] has zone, region, instance-type, internal-ip, external-ip, hostname, internal-dns, external-dns, label, state"},
				{5, "unknown key; [Machine] has zone"},
			},
		},
		{
			name: "a key of another section",
			in:   global + "[Pool \"a\"]\naddresses = 192.0.2.0/28\nzone = a\n",
			want: []problem{{5, "unknown key; [Pool] has addresses, namespace, auto-assign"}},
		},
		{
			name: "unknown forwarding mode and an empty one",
			in:   global + "[Pool \"a\"]\naddresses = 192.0.2.0/28\nforwarding = dsr\n[Pool \"b\"]\naddresses = 192.0.2.16/28\nforwarding =\n",
			want: []problem{
				{5, `"dsr" is not a forwarding mode; use passthrough or proxy`},
				{8, "must not be empty"},
			},
		},
		{
			name: "single-valued keys given twice, in any case",
			in:   "[Global]\nregion = eu\nREGION = us\n[Machine \"a\"]\nstate = gone\nstate = running\n",
			want: []problem{
				{3, "given twice, here and on line 2; it takes one value"},
				{6, "given twice, here and on line 5"},
			},
		},
		{
			name: "empty and blank values",
			in:   "[Global]\nregion =\n[Machine \"a\"]\nzone\ninstance-type = \"\"\nstate =\ninternal-ip\nhostname =\n[Pool \"p\"]\naddresses =\nauto-assign =\nnamespace = \"\"\n",
			want: []problem{
				{2, "must not be empty"},
				{4, "needs a value: zone = ..."},
				{5, "must not be empty"},
				{6, "must not be empty"},
				{7, "needs a value: internal-ip = ..."},
				{8, "must not be empty"},
				{10, "must not be empty"},
				{11, `"" is not a bool`},
				{12, "must not be empty"},
			},
		},
		{
			name: "invalid label values",
			in:   "[Global]\nregion = eu west\n[Machine \"a\"]\nzone = -a\ninstance-type = " + strings.Repeat("x", 64) + "\n",
			want: []problem{
				{2, `"eu west" is not a valid label value`},
				{4, `"-a" is not a valid label value`},
				{5, "is not a valid label value: must be no more than 63 bytes"},
			},
		},
		{
			name: "bad IP addresses",
			in: global + "[Machine \"a\"]\n" +
				"internal-ip = 10.0.0.256\n" +
				"internal-ip = fe80::1%eth0\n" +
				"external-ip = ::ffff:192.0.2.1\n" +
				"external-ip = 192.0.2.0/24\n" +
				"internal-ip = 10.0.0.1\n" +
				"internal-ip = 10.0.0.1\n",
			want: []problem{
				{4, `"10.0.0.256" is not an IPv4 or IPv6 address`},
				{5, "must not have a zone"},
				{6, "write IPv4 addresses in IPv4 form (192.0.2.1)"},
				{7, `"192.0.2.0/24" is not an IPv4 or IPv6 address`},
				{9, "10.0.0.1 is already given on line 8"},
			},
		},
		{
			name: "bad DNS names",
			in:   global + "[Machine \"a\"]\nhostname = Web-1\ninternal-dns = a..b\nexternal-dns = x.example\nexternal-dns = x.example\n",
			want: []problem{
				{4, `"Web-1" is not a valid DNS name`},
				{5, `"a..b" is not a valid DNS name`},
				{7, "x.example is already given on line 6"},
			},
		},
		{
			name: "bad labels",
			in: global + "[Machine \"a\"]\n" +
				"label = novalue\n" +
				"label = =v\n" +
				"label = a/b/c=v\n" +
				"label = k=bad value\n" +
				"label = -k=-v\n" +
				"label = k=1\n" +
				"label = k=2\n",
			want: []problem{
				{4, `"novalue" is not key=value`},
				{5, `"" is not a valid label key`},
				{6, `"a/b/c" is not a valid label key`},
				{7, `"bad value" is not a valid label value`},
				{8, `"-k" is not a valid label key: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]'); "-v" is not a valid label value`},
				{10, "label key k is already given on line 9"},
			},
		},
		{
			name: "label keys Kubernetes sets itself",
			in: global + "[Machine \"a\"]\n" +
				"label = topology.kubernetes.io/zone=a\n" +
				"label = node.kubernetes.io/instance-type=big\n" +
				"label = failure-domain.beta.kubernetes.io/region=r\n" +
				"label = node-role.kubernetes.io/worker=\n" +
				"label = kubernetes.io/hostname=a\n" +
				"label = example.k8s.io/x=y\n" +
				"label = notkubernetes.io/x=y\n" +
				"label = kubernetes.io.example.com/x=y\n",
			want: []problem{
				{4, `label key "topology.kubernetes.io/zone" is set by the cloud-node controller from this machine's zone key, and a label here would be overwritten; set zone instead`},
				{5, "from this machine's instance-type key"},
				{6, "from this machine's region key"},
				{7, `label key "node-role.kubernetes.io/worker" is under kubernetes.io, which Kubernetes reserves for labels its own components set and may overwrite; use a key under a domain of your own`},
				{8, "is under kubernetes.io"},
				{9, "is under k8s.io"},
			},
		},
		{
			name: "bad state and bools",
			in:   "[Global]\nregion = eu\nauthoritative-inventory = maybe\n[Machine \"a\"]\nstate = stopped\n",
			want: []problem{
				{3, `"maybe" is not a bool; use true, yes, on, 1, false, no, off or 0`},
				{5, `"stopped" is not a machine state; use running, shutdown or gone`},
			},
		},
		{
			name: "bad namespaces",
			in:   global + "[Pool \"p\"]\naddresses = 192.0.2.0/28\nnamespace = Team\nnamespace = a.b\nnamespace = ok\nnamespace = ok\n",
			want: []problem{
				{5, `"Team" is not a valid namespace name`},
				{6, `"a.b" is not a valid namespace name: must not contain dots`},
				{8, "ok is already given on line 7"},
			},
		},

		// Address ranges.
		{
			name: "bad address ranges",
			in: global + "[Pool \"p\"]\n" +
				"addresses = 192.0.2.5/28\n" +
				"addresses = 2001:db8::1/120\n" +
				"addresses = 192.0.2.20-192.0.2.10\n" +
				"addresses = 192.0.2.1-2001:db8::1\n" +
				"addresses = 192.0.2.1\n" +
				"addresses = 2001:db8::1\n" +
				"addresses = pool-a\n" +
				"addresses = 192.0.2.1-\n" +
				"addresses = 10.0.0.0/33\n" +
				"addresses = ::ffff:10.0.0.0/120\n" +
				"addresses = fe80::1%eth0-fe80::2\n",
			want: []problem{
				{4, `CIDR "192.0.2.5/28" has host bits set; did you mean 192.0.2.0/28?`},
				{5, "did you mean 2001:db8::/120?"},
				{6, `range "192.0.2.20-192.0.2.10" ends before it starts`},
				{7, `range "192.0.2.1-2001:db8::1" mixes IPv4 and IPv6`},
				{8, `"192.0.2.1" is a single address; write it as a CIDR (192.0.2.1/32) or a range`},
				{9, "(2001:db8::1/128)"},
				{10, `"pool-a" is neither a CIDR (192.0.2.0/28) nor a range (192.0.2.10-192.0.2.20)`},
				{11, `range "192.0.2.1-": "" is not an IPv4 or IPv6 address`},
				{12, `"10.0.0.0/33" is not a valid CIDR`},
				{13, "write IPv4 addresses in IPv4 form"},
				{14, "must not have a zone"},
			},
		},
		{
			name: "ranges with addresses no Service can be reached on",
			in: global + "[Pool \"p\"]\n" +
				"addresses = 0.0.0.0/32\n" + // 4
				"addresses = 0.0.0.0-0.0.0.9\n" +
				"addresses = 127.0.0.1-127.0.0.2\n" +
				"addresses = 126.255.255.250-128.0.0.5\n" +
				"addresses = 169.254.10.0/24\n" +
				"addresses = 224.0.0.0/24\n" +
				"addresses = 239.255.255.255/32\n" + // 10
				"addresses = 255.255.255.254/31\n" +
				"addresses = 192.0.2.0-255.255.255.255\n" +
				"addresses = ::/120\n" +
				"addresses = ::1/128\n" +
				"addresses = ::2-::1:0:0:0\n" + // 15
				"addresses = fe80::/64\n" +
				"addresses = febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff-fec0::1\n" +
				"addresses = ff02::1/128\n" +
				"addresses = 2001:db8::/120\n" + // 19: usable
				"addresses = 192.0.2.0/24\n" + // 20: usable; line 12 was refused, so no overlap
				"[Pool \"q\"]\n" +
				"addresses = 0.0.0.0/0\n", // 22
			want: []problem{
				{4, `[Pool "p"] addresses: 0.0.0.0/32 contains the unspecified address 0.0.0.0, which cannot be a Service's address; write ranges that leave them out`},
				{5, "0.0.0.0-0.0.0.9 contains the unspecified address 0.0.0.0,"},
				{6, "127.0.0.1-127.0.0.2 contains loopback addresses (127.0.0.0/8),"},
				{7, "126.255.255.250-128.0.0.5 contains loopback addresses (127.0.0.0/8),"},
				{8, "169.254.10.0/24 contains link-local addresses (169.254.0.0/16),"},
				{9, "224.0.0.0/24 contains multicast addresses (224.0.0.0/4),"},
				{10, "239.255.255.255/32 contains multicast addresses (224.0.0.0/4),"},
				{11, "255.255.255.254/31 contains the broadcast address 255.255.255.255,"},
				{12, "192.0.2.0-255.255.255.255 contains multicast addresses (224.0.0.0/4) and the broadcast address 255.255.255.255,"},
				{13, "::/120 contains the unspecified address :: and the loopback address ::1,"},
				{14, "::1/128 contains the loopback address ::1,"},
				{15, "::2-::1:0:0:0 contains IPv4-mapped addresses (::ffff:0.0.0.0/96),"},
				{16, "fe80::/64 contains link-local addresses (fe80::/10),"},
				{17, "contains link-local addresses (fe80::/10),"},
				{18, "ff02::1/128 contains multicast addresses (ff00::/8),"},
				{22, "0.0.0.0/0 contains the unspecified address 0.0.0.0, loopback addresses (127.0.0.0/8), link-local addresses (169.254.0.0/16), multicast addresses (224.0.0.0/4) and the broadcast address 255.255.255.255,"},
			},
		},
		{
			name: "overlapping pools name both",
			in: global +
				"[Pool \"a\"]\naddresses = 192.0.2.0/28\n" + // 4
				"[Pool \"b\"]\naddresses = 192.0.2.10-192.0.2.20\n" + // 6
				"[Pool \"c\"]\naddresses = 2001:db8::/64\n" + // 8
				"[Pool \"d\"]\naddresses = 2001:db8::ffff-2001:db8:0:1::\n", // 10
			want: []problem{
				{6, `[Pool "b"] addresses: 192.0.2.10-192.0.2.20 overlaps 192.0.2.0/28 of [Pool "a"] on line 4`},
				{10, `2001:db8::ffff-2001:db8:0:1:: overlaps 2001:db8::/64 of [Pool "c"] on line 8`},
			},
		},
		{
			name: "overlap within one pool and a later, wider range",
			in: global + "[Pool \"a\"]\n" +
				"addresses = 192.0.2.16/28\n" + // 4
				"addresses = 192.0.2.20-192.0.2.21\n" + // 5
				"[Pool \"b\"]\n" +
				"addresses = 192.0.2.0/24\n", // 7
			want: []problem{
				{5, "192.0.2.20/31 overlaps 192.0.2.16/28 on line 4 of this pool"},
				{7, `192.0.2.0/24 overlaps 192.0.2.16/28 of [Pool "a"] on line 4`},
			},
		},
		{
			name: "ranges of a pool that is not kept are not checked for overlap",
			in:   global + "[Pool \"a\"]\naddresses = 192.0.2.0/28\n[Pool \"a\"]\naddresses = 192.0.2.0/28\n",
			want: []problem{{5, "section given twice"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("cloud.conf", []byte(tc.in))
			if cfg != nil {
				t.Errorf("Parse returned a Config with error %v", err)
			}
			checkProblems(t, err, tc.want)
		})
	}
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

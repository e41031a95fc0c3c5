package ipam

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
)

func TestRequestFromService(t *testing.T) {
	tests := []struct {
		name    string
		svc     *v1.Service
		want    Request
		wantErr []string // substrings of the error, which wraps ErrInvalidRequest
	}{
		{
			name: "defaults: single-stack IPv4, auto pool, no sharing",
			svc:  newService("web", withPorts("TCP/80")),
			want: Request{Key: key("web"), Families: []v1.IPFamily{v4}, FamilyPolicy: single, Ports: []Port{{"TCP", 80}}},
		},
		{
			name: "ports sorted, deduplicated, protocol defaults to TCP",
			svc:  newService("web", withPorts("UDP/53", "/443", "TCP/53", "TCP/443")),
			want: Request{Key: key("web"), Families: []v1.IPFamily{v4}, FamilyPolicy: single, Ports: []Port{{"TCP", 53}, {"TCP", 443}, {"UDP", 53}}},
		},
		{
			name: "pool annotation, trimmed",
			svc:  newService("web", withPool(" public ")),
			want: Request{Key: key("web"), Pool: "public", Families: []v1.IPFamily{v4}, FamilyPolicy: single},
		},
		{
			name: "single-stack takes the first family",
			svc:  newService("web", withFamilies(single, v6)),
			want: Request{Key: key("web"), Families: []v1.IPFamily{v6}, FamilyPolicy: single},
		},
		{
			name: "prefer dual-stack in a single-stack cluster (one family listed) stays single",
			svc:  newService("web", withFamilies(prefer, v6)),
			want: Request{Key: key("web"), Families: []v1.IPFamily{v6}, FamilyPolicy: prefer},
		},
		{
			name: "prefer dual-stack in a dual-stack cluster asks for both",
			svc:  newService("web", withFamilies(prefer, v6, v4)),
			want: Request{Key: key("web"), Families: []v1.IPFamily{v6, v4}, FamilyPolicy: prefer},
		},
		{
			name: "require dual-stack keeps the order",
			svc:  newService("web", withFamilies(require, v4, v6)),
			want: Request{Key: key("web"), Families: []v1.IPFamily{v4, v6}, FamilyPolicy: require},
		},
		{
			name: "dual-stack without families: IPv4 first",
			svc:  newService("web", withFamilies(require)),
			want: Request{Key: key("web"), Families: []v1.IPFamily{v4, v6}, FamilyPolicy: require},
		},
		{
			name: "requested addresses, whitespace tolerated",
			svc:  newService("web", withFamilies(prefer, v4, v6), withIPs(" 2001:db8::5 ,10.0.0.5 ")),
			want: Request{Key: key("web"), Families: []v1.IPFamily{v4, v6}, FamilyPolicy: prefer, Addresses: addrs("2001:db8::5", "10.0.0.5")},
		},
		{
			name: "deprecated spec.loadBalancerIP",
			svc:  newService("web", withLoadBalancerIP("10.0.0.7")),
			want: Request{Key: key("web"), Families: []v1.IPFamily{v4}, FamilyPolicy: single, Addresses: addrs("10.0.0.7")},
		},
		{
			name: "spec.loadBalancerIP among the annotation's addresses",
			svc:  newService("web", withFamilies(prefer, v4, v6), withIPs("10.0.0.7,2001:db8::7"), withLoadBalancerIP("10.0.0.7")),
			want: Request{Key: key("web"), Families: []v1.IPFamily{v4, v6}, FamilyPolicy: prefer, Addresses: addrs("10.0.0.7", "2001:db8::7")},
		},
		{
			name: "blank annotation is absent",
			svc:  newService("web", withIPs("  "), withLoadBalancerIP("10.0.0.7")),
			want: Request{Key: key("web"), Families: []v1.IPFamily{v4}, FamilyPolicy: single, Addresses: addrs("10.0.0.7")},
		},
		{
			name: "sharing key",
			svc:  newService("dns-tcp", withSharing("dns"), withPorts("TCP/53")),
			want: Request{Key: key("dns-tcp"), Families: []v1.IPFamily{v4}, FamilyPolicy: single, SharingKey: "dns", Ports: []Port{{"TCP", 53}}},
		},
		{
			name:    "not an address",
			svc:     newService("web", withIPs("10.0.0.x")),
			wantErr: []string{`service default/web: invalid request: annotation groundcloud.io/load-balancer-ips: "10.0.0.x" is not an IP address; use comma-separated addresses, at most one IPv4 and one IPv6`},
		},
		{
			name:    "empty entry",
			svc:     newService("web", withIPs("10.0.0.1,")),
			wantErr: []string{`"10.0.0.1," has an empty entry; use comma-separated`},
		},
		{
			name:    "two of a family",
			svc:     newService("web", withFamilies(prefer), withIPs("10.0.0.1, 10.0.0.2")),
			wantErr: []string{`has more than one IPv4 address; use comma-separated addresses, at most one IPv4 and one IPv6`},
		},
		{
			name:    "IPv6 on a single-stack IPv4 Service",
			svc:     newService("web", withIPs("2001:db8::1")),
			wantErr: []string{`2001:db8::1 is IPv6 but the Service is single-stack IPv4; request an IPv4 address, or set spec.ipFamilyPolicy to PreferDualStack or RequireDualStack`},
		},
		{
			name:    "IPv6 spec.loadBalancerIP on single-stack IPv4",
			svc:     newService("web", withLoadBalancerIP("2001:db8::1")),
			wantErr: []string{`spec.loadBalancerIP: 2001:db8::1 is IPv6 but the Service is single-stack IPv4`},
		},
		{
			name:    "zone",
			svc:     newService("web", withFamilies(single, v6), withIPs("fe80::1%eth0")),
			wantErr: []string{`"fe80::1%eth0" has a zone; write the address without %zone`},
		},
		{
			name:    "IPv4-mapped",
			svc:     newService("web", withIPs("::ffff:10.0.0.1")),
			wantErr: []string{`"::ffff:10.0.0.1" is an IPv4-mapped IPv6 address; write it as 10.0.0.1`},
		},
		{
			name:    "annotation and spec.loadBalancerIP differ",
			svc:     newService("web", withIPs("10.0.0.1"), withLoadBalancerIP("10.0.0.2")),
			wantErr: []string{`spec.loadBalancerIP "10.0.0.2" is not among annotation groundcloud.io/load-balancer-ips "10.0.0.1"; remove spec.loadBalancerIP (it is deprecated)`},
		},
		{
			name:    "bad spec.loadBalancerIP",
			svc:     newService("web", withLoadBalancerIP("nope")),
			wantErr: []string{`spec.loadBalancerIP: "nope" is not an IP address`},
		},
		{
			name:    "empty sharing key",
			svc:     newService("web", withSharing("")),
			wantErr: []string{`annotation groundcloud.io/allow-shared-ip is empty; set it to a sharing key`},
		},
		{
			name:    "bad sharing key",
			svc:     newService("web", withSharing("not a key")),
			wantErr: []string{`annotation groundcloud.io/allow-shared-ip: "not a key" is not a valid sharing key (`, `use at most 63 letters`},
		},
		{
			name:    "bad family",
			svc:     newService("web", withFamilies(single, "IPv5")),
			wantErr: []string{`spec.ipFamilies[0] is "IPv5"; use IPv4 or IPv6`},
		},
		{
			name:    "family twice",
			svc:     newService("web", withFamilies(require, v4, v4)),
			wantErr: []string{`spec.ipFamilies lists IPv4 twice; list each family once`},
		},
		{
			name:    "bad policy",
			svc:     newService("web", withFamilies("MaybeDualStack", v4)),
			wantErr: []string{`spec.ipFamilyPolicy is "MaybeDualStack"; use SingleStack, PreferDualStack or RequireDualStack`},
		},
		{
			name:    "bad port",
			svc:     newService("web", withPorts("TCP/0", "ICMP/1")),
			wantErr: []string{`spec.ports[0]: port 0 is not between 1 and 65535`, `spec.ports[1]: protocol "ICMP" is not TCP, UDP or SCTP`},
		},
		{
			name:    "every problem at once",
			svc:     newService("web", withIPs("x"), withSharing("-")),
			wantErr: []string{`"x" is not an IP address`, `"-" is not a valid sharing key`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := RequestFromService(tt.svc)
			if tt.wantErr != nil {
				if !errors.Is(err, ErrInvalidRequest) {
					t.Fatalf("error = %v, want one wrapping ErrInvalidRequest", err)
				}
				for _, s := range tt.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q\ndoes not contain %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, addrCmp); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
			if _, err := got.normalized(); err != nil {
				t.Errorf("request is not valid for Assign: %v", err)
			}
		})
	}
}

func TestRequestFromServiceDoesNotModify(t *testing.T) {
	svc := newService("web", withPorts("TCP/443", "TCP/80"), withIPs("10.0.0.1"))
	before := svc.DeepCopy()
	mustRequest(t, svc)
	if diff := cmp.Diff(before, svc); diff != "" {
		t.Errorf("service changed (-before +after):\n%s", diff)
	}
}

func TestRequestValidation(t *testing.T) {
	good := Request{Key: key("web"), Families: []v1.IPFamily{v4}, FamilyPolicy: single}
	tests := []struct {
		name string
		mod  func(*Request)
		want string
	}{
		{"no name", func(r *Request) { r.Key.Name = "" }, "needs a namespace and a name"},
		{"no families", func(r *Request) { r.Families = nil }, `family policy "SingleStack" does not fit families []`},
		{"no policy", func(r *Request) { r.FamilyPolicy = "" }, `family policy "" does not fit`},
		{"require with one family", func(r *Request) { r.FamilyPolicy = require }, "does not fit"},
		{"address of another family", func(r *Request) { r.Addresses = addrs("2001:db8::1") }, "is IPv6, which is not among the families"},
		{"two addresses of a family", func(r *Request) { r.FamilyPolicy = prefer; r.Addresses = addrs("10.0.0.1", "10.0.0.2") }, "more than one IPv4"},
		{"invalid address", func(r *Request) { r.Addresses = make([]netip.Addr, 1) }, "not valid"},
		{"bad sharing key", func(r *Request) { r.SharingKey = "a b" }, "not a label value"},
		{"bad port", func(r *Request) { r.Ports = []Port{{"TCP", 70000}} }, "not between 1 and 65535"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := good
			tt.mod(&req)
			_, err := New(nil).Assign(req)
			if !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Assign error = %v, want ErrInvalidRequest with %q", err, tt.want)
			}
		})
	}
}

// FuzzRequestFromService checks that no annotation makes RequestFromService
// panic, that its errors are never empty, and that what it accepts Assign
// accepts too.
func FuzzRequestFromService(f *testing.F) {
	f.Add("", "10.0.0.1", "", "", uint8(0))
	f.Add("public", "10.0.0.1, 2001:db8::1", "dns", "10.0.0.1", uint8(5))
	f.Add(" ", ",", "-", "x", uint8(7))
	f.Add("p", "::ffff:1.2.3.4", "a_b.c", "fe80::1%eth0", uint8(2))
	f.Fuzz(func(t *testing.T, pool, ips, sharing, lbIP string, shape uint8) {
		policies := []v1.IPFamilyPolicy{single, prefer, require}
		famLists := [][]v1.IPFamily{nil, {v4}, {v6}, {v4, v6}, {v6, v4}}
		svc := newService("web", withPorts("TCP/80"), withLoadBalancerIP(lbIP),
			withFamilies(policies[int(shape)%len(policies)], famLists[int(shape/3)%len(famLists)]...),
			withPool(pool), withIPs(ips))
		if shape&0x80 == 0 {
			withSharing(sharing)(svc)
		}
		req, err := RequestFromService(svc)
		if err != nil {
			if err.Error() == "" || !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("error %q does not wrap ErrInvalidRequest or is empty", err)
			}
			return
		}
		if _, err := req.normalized(); err != nil {
			t.Fatalf("RequestFromService accepted a request Assign refuses: %v", err)
		}
	})
}

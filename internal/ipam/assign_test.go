package ipam

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/groundcloud/groundcloud/internal/config"
)

// TestAssign checks each rule on one Assign, after some Services are
// assigned already. Its cases are in testdata/assign.txt, one a paragraph:
//
//	case <name>
//	pool <name> <range>... [manual] [cross-namespace] [namespaces=<ns>,...] [forwarding=proxy]
//	before <service>       (assigned first, in order; must succeed)
//	assign <service>       (the Assign checked)
//	want <pool> <address>...
//
// or, for an Assign that must fail, instead of want:
//
//	error <sentinel>       (ErrPoolExhausted, ...: errors.Is)
//	contains <text>        (a part of the message)
//	omits <text>           (what another namespace must not learn)
//
// A <service> is a name and options: namespace=, pool=, ips=, sharing=
// and forwarding= (its annotations), ports=TCP/80,UDP/53, policy=PreferDualStack,
// families=IPv6,IPv4 and loadBalancerIP=. Lines starting with # are
// comments.
func TestAssign(t *testing.T) {
	cases := readAssignCases(t, "testdata/assign.txt")
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			a := New(tt.pools)
			for _, svc := range tt.before {
				mustAssign(t, a, svc)
			}
			got, err := a.Assign(mustRequest(t, tt.svc))
			if tt.wantErr != nil {
				checkErr(t, err, tt.wantErr, tt.wantMsg...)
				for _, m := range tt.notMsg {
					if strings.Contains(err.Error(), m) {
						t.Errorf("error %q\nreveals %q", err, m)
					}
				}
				if _, ok := a.Lookup(key(tt.svc.Namespace + "/" + tt.svc.Name)); ok {
					t.Errorf("failed Assign recorded an allocation")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, addrCmp); diff != "" {
				t.Errorf("allocation (-want +got):\n%s", diff)
			}
		})
	}
}

// assignCase is one case of TestAssign.
type assignCase struct {
	name    string
	pools   []*config.Pool
	before  []*v1.Service
	svc     *v1.Service
	want    Allocation
	wantErr error
	wantMsg []string // substrings of the error
	notMsg  []string // not in the error
}

func readAssignCases(t *testing.T, path string) []assignCase {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cases, err := parseAssignCases(string(data))
	if err != nil {
		t.Fatalf("%s:%v", path, err)
	}
	if len(cases) == 0 {
		t.Fatalf("%s: no cases", path)
	}
	return cases
}

func parseAssignCases(text string) ([]assignCase, error) {
	var cases []assignCase
	starts := map[string]int{}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		word, rest, _ := strings.Cut(line, " ")
		if word == "case" {
			if first, dup := starts[rest]; dup {
				return nil, fmt.Errorf("%d: case %q is also on line %d", i+1, rest, first)
			}
			starts[rest] = i + 1
			cases = append(cases, assignCase{name: rest})
			continue
		}
		if len(cases) == 0 {
			return nil, fmt.Errorf("%d: %q comes before any case", i+1, word)
		}
		if err := cases[len(cases)-1].add(word, rest); err != nil {
			return nil, fmt.Errorf("%d: %w", i+1, err)
		}
	}
	for _, c := range cases {
		if err := c.complete(); err != nil {
			return nil, fmt.Errorf("%d: case %q: %w", starts[c.name], c.name, err)
		}
	}
	return cases, nil
}

// add reads one line of the case.
func (c *assignCase) add(word, rest string) error {
	var err error
	switch word {
	case "pool":
		var p *config.Pool
		p, err = parsePool(rest)
		c.pools = append(c.pools, p)
	case "before":
		var svc *v1.Service
		svc, err = parseService(rest)
		c.before = append(c.before, svc)
	case "assign":
		if c.svc != nil {
			return errors.New("assign given twice")
		}
		c.svc, err = parseService(rest)
	case "want":
		if c.want.Pool != "" {
			return errors.New("want given twice")
		}
		c.want, err = parseAllocation(rest)
	case "error":
		if c.wantErr != nil {
			return errors.New("error given twice")
		}
		e, ok := sentinelsByName[rest]
		if !ok {
			return fmt.Errorf("%q is not an Err variable of this package", rest)
		}
		c.wantErr = e
	case "contains":
		c.wantMsg = append(c.wantMsg, rest)
	case "omits":
		c.notMsg = append(c.notMsg, rest)
	default:
		return fmt.Errorf("unknown line %q", word)
	}
	return err
}

func (c *assignCase) complete() error {
	switch {
	case c.svc == nil:
		return errors.New("no assign line")
	case c.wantErr == nil && c.want.Pool == "":
		return errors.New("neither want nor error")
	case c.wantErr != nil && c.want.Pool != "":
		return errors.New("both want and error")
	case c.wantErr == nil && len(c.wantMsg)+len(c.notMsg) > 0:
		return errors.New("contains or omits without error")
	}
	return nil
}

// sentinelsByName are the package's sentinel errors, by the names the
// cases use.
var sentinelsByName = map[string]error{
	"ErrInvalidRequest":      ErrInvalidRequest,
	"ErrUnknownPool":         ErrUnknownPool,
	"ErrNamespaceNotAllowed": ErrNamespaceNotAllowed,
	"ErrNotInPool":           ErrNotInPool,
	"ErrAddressInUse":        ErrAddressInUse,
	"ErrSharingConflict":     ErrSharingConflict,
	"ErrFamilyUnavailable":   ErrFamilyUnavailable,
	"ErrPoolExhausted":       ErrPoolExhausted,
}

// parsePool reads "name range... [manual] [cross-namespace] [namespaces=a,b] [forwarding=f]".
func parsePool(s string) (*config.Pool, error) {
	f := strings.Fields(s)
	if len(f) == 0 {
		return nil, errors.New("pool without a name")
	}
	p := &config.Pool{Name: f[0], AutoAssign: true}
	for _, w := range f[1:] {
		switch k, v, _ := strings.Cut(w, "="); {
		case w == "manual":
			p.AutoAssign = false
		case w == "cross-namespace":
			p.AllowCrossNamespaceSharing = true
		case k == "namespaces":
			p.Namespaces = strings.Split(v, ",")
		case k == "forwarding":
			p.Forwarding = config.Forwarding(v)
		default:
			r, err := config.ParseAddrRange(w)
			if err != nil {
				return nil, fmt.Errorf("pool %s: %w", f[0], err)
			}
			p.Ranges = append(p.Ranges, r)
		}
	}
	return p, nil
}

// parseService reads "name option=value...".
func parseService(s string) (*v1.Service, error) {
	f := strings.Fields(s)
	if len(f) == 0 {
		return nil, errors.New("service without a name")
	}
	var mods []func(*v1.Service)
	var policy *v1.IPFamilyPolicy
	var families []v1.IPFamily
	for _, w := range f[1:] {
		k, v, ok := strings.Cut(w, "=")
		if !ok {
			return nil, fmt.Errorf("service %s: %q is not option=value", f[0], w)
		}
		switch k {
		case "namespace":
			mods = append(mods, inNamespace(v))
		case "pool":
			mods = append(mods, withPool(v))
		case "ips":
			mods = append(mods, withIPs(v))
		case "sharing":
			mods = append(mods, withSharing(v))
		case "forwarding":
			mods = append(mods, withForwarding(v))
		case "loadBalancerIP":
			mods = append(mods, withLoadBalancerIP(v))
		case "ports":
			ports := strings.Split(v, ",")
			for _, p := range ports {
				if err := checkPortSpec(p); err != nil {
					return nil, fmt.Errorf("service %s: %w", f[0], err)
				}
			}
			mods = append(mods, withPorts(ports...))
		case "policy":
			p := v1.IPFamilyPolicy(v)
			if p != single && p != prefer && p != require {
				return nil, fmt.Errorf("service %s: %q is not an IP family policy", f[0], v)
			}
			policy = &p
		case "families":
			for _, fam := range strings.Split(v, ",") {
				if fam != string(v4) && fam != string(v6) {
					return nil, fmt.Errorf("service %s: %q is not an IP family", f[0], fam)
				}
				families = append(families, v1.IPFamily(fam))
			}
		default:
			return nil, fmt.Errorf("service %s: unknown option %q", f[0], k)
		}
	}
	if families != nil && policy == nil {
		return nil, fmt.Errorf("service %s: families without a policy", f[0])
	}
	if policy != nil {
		mods = append(mods, withFamilies(*policy, families...))
	}
	return newService(f[0], mods...), nil
}

// checkPortSpec checks a port written "TCP/80", as withPorts reads it.
func checkPortSpec(s string) error {
	proto, num, _ := strings.Cut(s, "/")
	if _, err := strconv.ParseUint(num, 10, 16); err != nil || (proto != "TCP" && proto != "UDP" && proto != "SCTP") {
		return fmt.Errorf("%q is not a port such as TCP/80", s)
	}
	return nil
}

// parseAllocation reads "pool address...".
func parseAllocation(s string) (Allocation, error) {
	f := strings.Fields(s)
	if len(f) < 2 {
		return Allocation{}, errors.New("want needs a pool and an address")
	}
	a := Allocation{Pool: f[0]}
	for _, w := range f[1:] {
		addr, err := netip.ParseAddr(w)
		if err != nil {
			return Allocation{}, err
		}
		a.Addresses = append(a.Addresses, addr)
	}
	return a, nil
}

func checkErr(t *testing.T, err, want error, msgs ...string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error = %v, want %v", err, want)
	}
	if !strings.HasPrefix(err.Error(), "service ") {
		t.Errorf("error %q does not name the Service first", err)
	}
	for _, m := range msgs {
		if !strings.Contains(err.Error(), m) {
			t.Errorf("error %q\ndoes not contain %q", err, m)
		}
	}
}

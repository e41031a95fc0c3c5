package loadbalancers

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
)

const annotationSourceRanges = v1.AnnotationLoadBalancerSourceRangesKey

func rangesService(spec []string, annotation *string) *v1.Service {
	svc := &v1.Service{Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, LoadBalancerSourceRanges: spec}}
	if annotation != nil {
		svc.Annotations = map[string]string{annotationSourceRanges: *annotation}
	}
	return svc
}

func TestSourceRanges(t *testing.T) {
	var hundredAndOne, hundredTwice, hundred []string
	for i := range MaxSourceRanges + 1 {
		hundredAndOne = append(hundredAndOne, fmt.Sprintf("10.0.%d.0/24", i))
	}
	for i := range MaxSourceRanges {
		hundredTwice = append(hundredTwice, fmt.Sprintf("10.0.%d.0/24", i), fmt.Sprintf("10.0.%d.7/24", i))
		hundred = append(hundred, fmt.Sprintf("10.0.%d.0/24", i))
	}
	slices.Sort(hundred)
	for _, tt := range []struct {
		name       string
		spec       []string
		annotation *string
		want       []string
		wantErr    []string // each must be in the message; none: no error
	}{
		{name: "none: every client", want: nil},
		{name: "spec field", spec: []string{"198.51.100.0/24", "10.0.0.0/8"}, want: []string{"10.0.0.0/8", "198.51.100.0/24"}},
		{name: "annotation", annotation: ptrTo("10.0.0.0/8, 192.168.0.0/16 ,2001:db8::/32"), want: []string{"10.0.0.0/8", "192.168.0.0/16", "2001:db8::/32"}},
		{name: "the spec field takes precedence", spec: []string{"10.0.0.0/8"}, annotation: ptrTo("bogus"), want: []string{"10.0.0.0/8"}},
		{name: "an empty annotation allows everyone", annotation: ptrTo("  "), want: nil},
		{name: "spaces", spec: []string{" 10.0.0.0/8", "192.0.2.0/24 "}, want: []string{"10.0.0.0/8", "192.0.2.0/24"}},
		{name: "legacy: leading zeros", spec: []string{"010.001.000.000/016", "192.0.2.0/024"}, want: []string{"10.1.0.0/16", "192.0.2.0/24"}},
		{name: "legacy: bits beyond the prefix", spec: []string{"10.1.2.3/8", "2001:db8::1/32"}, want: []string{"10.0.0.0/8", "2001:db8::/32"}},
		{name: "non-canonical IPv6", spec: []string{"2001:DB8:0:0::/48"}, want: []string{"2001:db8::/48"}},
		{name: "legacy: IPv4-mapped IPv6", annotation: ptrTo("::ffff:192.0.2.0/120"), want: []string{"192.0.2.0/24"}},
		{name: "duplicates", spec: []string{"10.0.0.0/8", "10.9.9.9/8", "10.0.0.0/8"}, want: []string{"10.0.0.0/8"}},
		{name: "at the limit once merged", spec: hundredTwice, want: hundred},

		{name: "one bad entry denies all", spec: []string{"10.0.0.0/8", "bogus"}, want: DenyAllSourceRanges,
			wantErr: []string{"spec.loadBalancerSourceRanges", `"bogus" is not a CIDR`, "accepts no client"}},
		{name: "every entry bad", annotation: ptrTo("bogus,10.0.0.0"), want: DenyAllSourceRanges,
			wantErr: []string{"annotation " + annotationSourceRanges, `"bogus"`, `"10.0.0.0"`}},
		{name: "trailing comma", annotation: ptrTo("10.0.0.0/8,"), want: DenyAllSourceRanges, wantErr: []string{`"" is not a CIDR`}},
		{name: "prefix too long", spec: []string{"10.0.0.0/33"}, want: DenyAllSourceRanges, wantErr: []string{`"10.0.0.0/33"`}},
		{name: "zone", spec: []string{"fe80::%eth0/64"}, want: DenyAllSourceRanges, wantErr: []string{"fe80::%eth0/64"}},
		{name: "empty entry in the field", spec: []string{""}, want: DenyAllSourceRanges, wantErr: []string{`""`}},
		{name: "IPv4-mapped reaching into IPv6", spec: []string{"::ffff:0.0.0.0/95"}, want: DenyAllSourceRanges, wantErr: []string{"IPv4-mapped"}},
		{name: "over the limit", spec: hundredAndOne, want: DenyAllSourceRanges, wantErr: []string{"101 ranges", "(100)"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SourceRanges(rangesService(tt.spec, tt.annotation))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("SourceRanges (-want +got):\n%s", diff)
			}
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Errorf("unexpected error: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrSourceRanges) {
				t.Fatalf("error %v, want ErrSourceRanges", err)
			}
			for _, s := range tt.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}
}

// FuzzSourceRanges checks that no input opens a Service that asked for
// source ranges, or writes a range the CRD would refuse: the result is
// either DenyAllSourceRanges with an error, or every entry given, each
// usable. field holds spec.loadBalancerSourceRanges one per line.
func FuzzSourceRanges(f *testing.F) {
	for _, seed := range [][2]string{
		{"", ""}, {"10.0.0.0/8\n192.0.2.0/24", ""}, {"", "10.0.0.0/8, 2001:db8::/32"}, {" 010.1.2.3/08 ", ""},
		{"", "::ffff:192.0.2.0/120"}, {"", "bogus"}, {"10.0.0.0/8", "bogus"}, {"", "10.0.0.0/8,"}, {"fe80::%eth0/64", ""},
		{"", " , "}, {"::/0\n0.0.0.0/0", ""}, {"1.2.3.4/32\n\n", ""},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, field, annotation string) {
		var spec []string
		if field != "" {
			spec = strings.Split(field, "\n")
		}
		svc := rangesService(spec, &annotation)
		got, err := SourceRanges(svc)

		entries := spec
		if len(entries) == 0 && strings.TrimSpace(annotation) != "" {
			entries = strings.Split(strings.TrimSpace(annotation), ",")
		}
		if err != nil {
			if !errors.Is(err, ErrSourceRanges) || !slices.Equal(got, DenyAllSourceRanges) {
				t.Fatalf("error %v with ranges %q; want ErrSourceRanges and DenyAllSourceRanges", err, got)
			}
			return
		}
		if len(entries) > 0 && len(got) == 0 {
			t.Fatalf("entries %q allow every client", entries)
		}
		if len(got) > MaxSourceRanges || !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
			t.Fatalf("ranges %q: want at most %d, sorted, once each", got, MaxSourceRanges)
		}
		for _, r := range got {
			p, err := netip.ParsePrefix(r)
			if err != nil || p != p.Masked() || p.String() != r || len(r) > 49 || p.Addr().Is4In6() || p.Addr().Zone() != "" {
				t.Fatalf("range %q is not a masked, canonical CIDR the CRD and the agents accept", r)
			}
		}
		for _, e := range entries {
			p, err := parseSourceRange(e)
			if err != nil || !slices.Contains(got, p.String()) {
				t.Fatalf("entry %q was dropped without an error (got %q)", e, got)
			}
		}
	})
}

package routeapi

import (
	"strings"
	"testing"
)

func TestCheckFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		enabled bool
		flags   Flags
		errs    []string
	}{
		{name: "routes off: anything goes", flags: Flags{}},
		{name: "single stack", enabled: true, flags: Flags{ConfigureCloudRoutes: true, ClusterCIDR: "10.244.0.0/16"}},
		{name: "dual stack", enabled: true, flags: Flags{ConfigureCloudRoutes: true, ClusterCIDR: "10.244.0.0/16,fd00:10:244::/56"}},
		{name: "every problem at once", enabled: true, flags: Flags{},
			errs: []string{"--configure-cloud-routes=false", "needs --cluster-cidr"}},
		{name: "bad CIDR", enabled: true, flags: Flags{ConfigureCloudRoutes: true, ClusterCIDR: "10.244.0.0"},
			errs: []string{`--cluster-cidr "10.244.0.0"`}},
		{name: "two of a family", enabled: true, flags: Flags{ConfigureCloudRoutes: true, ClusterCIDR: "10.244.0.0/16,10.245.0.0/16"},
			errs: []string{"different families"}},
		{name: "three", enabled: true, flags: Flags{ConfigureCloudRoutes: true, ClusterCIDR: "10.0.0.0/16,fd00::/56,10.1.0.0/16"},
			errs: []string{"at most two"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckFlags(tc.enabled, tc.flags)
			if len(tc.errs) == 0 {
				if err != nil {
					t.Fatalf("CheckFlags = %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("CheckFlags = nil, want %q", tc.errs)
			}
			for _, want := range tc.errs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("CheckFlags = %v, want it to contain %q", err, want)
				}
			}
		})
	}
}

package routeapi

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// Flags are the controller-manager flags pod routes depend on.
type Flags struct {
	// ConfigureCloudRoutes is --configure-cloud-routes (upstream default
	// true): without it the route controller does not start.
	ConfigureCloudRoutes bool
	// ClusterCIDR is --cluster-cidr: the pod network, one CIDR or an IPv4
	// and an IPv6 one separated by a comma, the same as
	// kube-controller-manager's. The route controller deletes only routes
	// inside it.
	ClusterCIDR string
}

// CheckFlags reports every flag that would keep routes from working when
// the cloud-config enables them, at once; with routes off it accepts
// anything. Upstream alone would start without routes on
// --configure-cloud-routes=false and exit with "invalid CIDR address" on
// an empty --cluster-cidr.
func CheckFlags(enabled bool, f Flags) error {
	if !enabled {
		return nil
	}
	var errs []error
	if !f.ConfigureCloudRoutes {
		errs = append(errs, errors.New("the cloud-config has a [Routes] section but --configure-cloud-routes=false, "+
			"so the route controller would not run: drop the flag, or set enabled = false in [Routes]"))
	}
	if strings.TrimSpace(f.ClusterCIDR) == "" {
		errs = append(errs, errors.New("the cloud-config has a [Routes] section, which needs --cluster-cidr: the pod network, "+
			"the same as kube-controller-manager's --cluster-cidr (e.g. 10.244.0.0/16,fd00:10:244::/56)"))
	} else if err := checkClusterCIDR(f.ClusterCIDR); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func checkClusterCIDR(s string) error {
	parts := strings.Split(s, ",")
	if len(parts) > 2 {
		return fmt.Errorf("--cluster-cidr %q: at most two CIDRs, an IPv4 and an IPv6 one", s)
	}
	var families []bool
	for _, part := range parts {
		p, err := netip.ParsePrefix(strings.TrimSpace(part))
		if err != nil {
			return fmt.Errorf("--cluster-cidr %q: %w", s, err)
		}
		families = append(families, p.Addr().Is4())
	}
	if len(families) == 2 && families[0] == families[1] {
		return fmt.Errorf("--cluster-cidr %q: two CIDRs must be of different families (dual-stack)", s)
	}
	return nil
}

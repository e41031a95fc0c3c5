package conformance

import (
	"fmt"
	"strings"
)

// Lane is one way of serving the suite's Services.
type Lane struct {
	// Name is "<family>-<announce>-<forwarding>", e.g. "ipv4-l2-passthrough".
	Name string
	// Family is "ipv4", "ipv6" or "dual" (dual-stack nodes and Services,
	// IPv4 first).
	Family string
	// Announce is "l2" or "bgp"; Forwarding "passthrough" or "proxy".
	Announce, Forwarding string
}

// DefaultLane is the lane `make test` runs.
const DefaultLane = "ipv4-l2-passthrough"

// Long are the specs `make test` leaves to `make conformance`
// (GROUNDCLOUD_CONFORMANCE=quick, which hack/test.sh sets): the two
// rolling-update specs take about ten minutes each (five updates of a
// DaemonSet whose Pods take 60 s to stop), more than CI's time for a
// warm run allows beside the other real-cluster tests.
var Long = []Skip{{
	Lanes:  []string{"*"},
	Spec:   "should not have connectivity disruption during rolling update",
	Reason: "about ten minutes each: run by make conformance, not make test",
}}

// Lanes are those `make conformance` runs: each family, announcement and
// forwarding at least once, and each pair of announcement and forwarding.
var Lanes = []string{
	"ipv4-l2-passthrough",
	"ipv4-l2-proxy",
	"ipv4-bgp-passthrough",
	"ipv4-bgp-proxy",
	"dual-l2-passthrough",
	"dual-l2-proxy",
	"ipv6-l2-passthrough",
}

// ParseLane parses a lane's name.
func ParseLane(name string) (Lane, error) {
	parts := strings.Split(name, "-")
	if len(parts) != 3 {
		return Lane{}, fmt.Errorf("lane %q: want <family>-<announce>-<forwarding>, e.g. %s", name, DefaultLane)
	}
	l := Lane{Name: name, Family: parts[0], Announce: parts[1], Forwarding: parts[2]}
	var errs []string
	if !oneOf(l.Family, "ipv4", "ipv6", "dual") {
		errs = append(errs, fmt.Sprintf("family %q: want ipv4, ipv6 or dual", l.Family))
	}
	if !oneOf(l.Announce, "l2", "bgp") {
		errs = append(errs, fmt.Sprintf("announce %q: want l2 or bgp", l.Announce))
	}
	if !oneOf(l.Forwarding, "passthrough", "proxy") {
		errs = append(errs, fmt.Sprintf("forwarding %q: want passthrough or proxy", l.Forwarding))
	}
	if len(errs) > 0 {
		return Lane{}, fmt.Errorf("lane %q: %s", name, strings.Join(errs, "; "))
	}
	return l, nil
}

// ParseLanes parses a comma-separated list of lanes; "all" is Lanes and ""
// the default lane.
func ParseLanes(s string) ([]Lane, error) {
	names := strings.Split(s, ",")
	switch strings.TrimSpace(s) {
	case "":
		names = []string{DefaultLane}
	case "all":
		names = Lanes
	}
	var out []Lane
	for _, n := range names {
		l, err := ParseLane(strings.TrimSpace(n))
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

func oneOf(s string, options ...string) bool {
	for _, o := range options {
		if s == o {
			return true
		}
	}
	return false
}

// clusterCIDRs are the lane's pod and service CIDRs.
func (l Lane) clusterCIDRs() (pods, services string) {
	switch l.Family {
	case "ipv4":
		return "10.244.0.0/16", "10.96.0.0/16"
	case "ipv6":
		return "fd00:10:244::/56", "fd00:10:96::/112"
	}
	return "", "" // the test bed's defaults: dual-stack, IPv4 first
}

// poolKeys are the keys of pool "default" the lane sets.
func (l Lane) poolKeys() string {
	return fmt.Sprintf("forwarding = %s\nannounce = %s\n", l.Forwarding, l.Announce)
}

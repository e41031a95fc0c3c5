package dataplane

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"sigs.k8s.io/knftables"
)

// hostSetting is a sysctl that forwarding through the data plane needs.
type hostSetting struct {
	family knftables.Family // "" for both
	path   string           // under /proc/sys
	want   string
	why    string
	// optional settings are skipped while their file is missing.
	optional bool
}

var hostSettings = []hostSetting{
	{knftables.IPv4Family, "net/ipv4/ip_forward", "1", "forward IPv4 packets to the nodes", false},
	{knftables.IPv6Family, "net/ipv6/conf/all/forwarding", "1", "forward IPv6 packets to the nodes", false},
	// The file exists once nf_conntrack is loaded, which our first sync does.
	{"", "net/netfilter/nf_conntrack_tcp_loose", "1", "keep established TCP flows across a VIP failover", true},
}

// CheckHost reports, all at once, the kernel settings of the calling
// thread's network namespace that the data plane needs and that are off, for
// the given families (none: both). It only reads: setting sysctls is the
// host's or the agent's deployment's business. Call it after the first Sync
// to cover the conntrack settings too.
func CheckHost(families ...knftables.Family) error {
	return checkHost(os.DirFS("/proc/sys"), families...)
}

func checkHost(sys fs.FS, families ...knftables.Family) error {
	if len(families) == 0 {
		families = []knftables.Family{knftables.IPv4Family, knftables.IPv6Family}
	}
	var problems []error
	for _, s := range hostSettings {
		if s.family != "" && !slices.Contains(families, s.family) {
			continue
		}
		name := strings.ReplaceAll(s.path, "/", ".")
		b, err := fs.ReadFile(sys, s.path)
		switch {
		case errors.Is(err, fs.ErrNotExist) && s.optional:
		case err != nil:
			problems = append(problems, fmt.Errorf("read %s: %w", name, err))
		case strings.TrimSpace(string(b)) != s.want:
			problems = append(problems, fmt.Errorf("%s is %s, must be %s to %s", name, strings.TrimSpace(string(b)), s.want, s.why))
		}
	}
	return errors.Join(problems...)
}

package netlab

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
)

// LinkRoot joins the root network namespace to the lab's bridge with a veth
// pair named name (at most 15 characters) and gives its root end the lab's
// gateway addresses, so that the machine's own shell reaches the lab's
// addresses (and virtual IPs in its subnets) directly.
//
// This is the only operation of the package that changes the root
// namespace; only the one-command sandbox uses it. The caller must check
// that the lab's subnets do not overlap the machine's routes. Remove the
// link with UnlinkRoot; deleting either end removes both.
func (l *Lab) LinkRoot(ctx context.Context, name string) error {
	if len(name) == 0 || len(name) > 15 {
		return fmt.Errorf("lab: root link name %q: want 1 to 15 characters", name)
	}
	l.mu.Lock()
	l.ports++
	port := fmt.Sprintf("v%d", l.ports)
	l.mu.Unlock()
	p4 := fmt.Sprintf("%s/%d", l.Gateway4, l.Subnet4.Bits())
	p6 := fmt.Sprintf("%s/%d", l.Gateway6, l.Subnet6.Bits())
	steps := [][]string{
		{"link", "add", name, "type", "veth", "peer", "name", port, "netns", l.SwitchNetns},
		{"-n", l.SwitchNetns, "link", "set", port, "master", bridgeName, "up"},
		{"addr", "add", p4, "dev", name},
		{"-6", "addr", "add", p6, "dev", name, "nodad"},
		{"link", "set", name, "up"},
	}
	for _, args := range steps {
		if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
			_ = UnlinkRoot(name)
			return fmt.Errorf("lab: ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// UnlinkRoot deletes the root end of a link made by LinkRoot, if it exists.
func UnlinkRoot(name string) error {
	if _, err := net.InterfaceByName(name); err != nil {
		return nil
	}
	if out, err := exec.Command("ip", "link", "del", name).CombinedOutput(); err != nil {
		return fmt.Errorf("lab: delete %s: %v: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

package controlplane

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
)

// AdminUser is the user of the admin kubeconfig, in system:masters.
const AdminUser = "admin"

// DefaultServiceCIDR is the service cluster IP range when Options leaves it
// empty.
const DefaultServiceCIDR = "10.96.0.0/16"

// User is a static-token user of the apiserver.
type User struct {
	Name   string
	Groups []string
}

// DefaultUsers are the component users provisioned when Options.Users is
// nil. They are cluster admins for now; least-privilege RBAC comes later.
func DefaultUsers() []User {
	return []User{
		{Name: "groundcloud-controller-manager", Groups: []string{"system:masters"}},
		{Name: "groundcloud-agent", Groups: []string{"system:masters"}},
	}
}

// Options configure Start. The zero value plus BinDir is a working set.
type Options struct {
	// BinDir holds kube-apiserver, kubectl and etcd (see ToolsDir), and
	// kube-controller-manager and kube-scheduler when they run. Required.
	BinDir string
	// Dir is the work directory. When empty, Start makes a temp directory
	// and Stop removes it; a given Dir is kept.
	Dir string
	// ServiceCIDR is --service-cluster-ip-range: one CIDR, or an IPv4 and an
	// IPv6 one separated by a comma (dual-stack); DefaultServiceCIDR if empty.
	ServiceCIDR string
	// Users get static tokens besides AdminUser; DefaultUsers() if nil.
	Users []User
	// ExtraAPIServerArgs are added to the apiserver's flags, each
	// "--name=value" replacing a default of that name; flags the test bed
	// manages (managedAPIServerFlags) are refused.
	ExtraAPIServerArgs []string
	// ControllerManager, when set, runs kube-controller-manager (from
	// BinDir) as its own user; Scheduler runs kube-scheduler. Without them
	// the apiserver stores what it is given and nothing acts on it.
	ControllerManager *ControllerManagerOptions
	Scheduler         bool
	// Logf receives progress messages; discarded if nil.
	Logf func(format string, args ...any)
	// Started, when set, is called with the pid of each process the
	// control plane starts (restarts included), right after it started; an
	// error stops that process and fails the start. The real cluster puts
	// them in a cgroup beside its nodes'.
	Started func(pid int) error

	// ownServingCert skips the apiserver's self-signed certificate, as if it
	// had not verified; for tests of that fallback.
	ownServingCert bool
}

// managedAPIServerFlags are set by the test bed from its own state; the
// clients it hands out depend on them.
var managedAPIServerFlags = []string{
	"--bind-address", "--secure-port", "--cert-dir", "--tls-cert-file",
	"--tls-private-key-file", "--etcd-servers", "--token-auth-file",
}

// Validate reports every problem with o at once.
func (o Options) Validate() error {
	var errs []error
	if o.BinDir == "" {
		errs = append(errs, errors.New("BinDir is required (see ToolsDir)"))
	} else if err := checkToolsNamed(o.BinDir, o.toolNames()); err != nil {
		errs = append(errs, fmt.Errorf("BinDir: %w", err))
	}
	if o.ServiceCIDR != "" {
		// One CIDR, or two of different families for a dual-stack cluster.
		for _, cidr := range strings.Split(o.ServiceCIDR, ",") {
			if _, err := netip.ParsePrefix(cidr); err != nil {
				errs = append(errs, fmt.Errorf("ServiceCIDR: %w", err))
			}
		}
	}
	for _, arg := range o.ExtraAPIServerArgs {
		name, _, _ := strings.Cut(arg, "=")
		if slices.Contains(managedAPIServerFlags, name) {
			errs = append(errs, fmt.Errorf("ExtraAPIServerArgs: %s is managed by the test bed", name))
		}
	}
	errs = append(errs, o.validateComponents())
	seen := map[string]bool{AdminUser: true}
	for _, u := range o.controlPlaneUsers() {
		seen[u.Name] = true
	}
	for i, u := range o.Users {
		switch {
		case u.Name == AdminUser:
			errs = append(errs, fmt.Errorf("Users[%d]: name %q is reserved", i, u.Name))
		case !validUserName(u.Name):
			errs = append(errs, fmt.Errorf("Users[%d]: name %q must be non-empty and usable as a file name", i, u.Name))
		case seen[u.Name]:
			errs = append(errs, fmt.Errorf("Users[%d]: duplicate name %q", i, u.Name))
		}
		seen[u.Name] = true
		for _, g := range u.Groups {
			if g == "" || strings.ContainsAny(g, ",\"\n") {
				errs = append(errs, fmt.Errorf("Users[%d]: group %q must be non-empty without commas, quotes or newlines", i, g))
			}
		}
	}
	return errors.Join(errs...)
}

func validUserName(name string) bool {
	return name != "" && name != "." && name != ".." &&
		filepath.Base(name) == name && !strings.ContainsAny(name, ",\"\n/")
}

// withDefaults returns o with empty fields filled and AdminUser first in
// Users.
func (o Options) withDefaults() Options {
	if o.ServiceCIDR == "" {
		o.ServiceCIDR = DefaultServiceCIDR
	}
	users := o.Users
	if users == nil {
		users = DefaultUsers()
	}
	o.Users = append([]User{{Name: AdminUser, Groups: []string{"system:masters"}}}, users...)
	o.Users = append(o.Users, o.controlPlaneUsers()...)
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return o
}

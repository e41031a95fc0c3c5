package controlplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Users of kube-controller-manager and kube-scheduler; the apiserver's
// bootstrap RBAC binds them to their roles (system:kube-controller-manager,
// system:kube-scheduler).
const (
	ControllerManagerUser = "system:kube-controller-manager"
	SchedulerUser         = "system:kube-scheduler"
)

// File names in the work directory.
const (
	caFileName        = "ca.crt"
	controllerLogName = "kube-controller-manager.log"
	schedulerLogName  = "kube-scheduler.log"
)

// ControllerManagerOptions configure kube-controller-manager.
type ControllerManagerOptions struct {
	// ClusterCIDR is the pod network: node-ipam gives each Node its pod
	// CIDRs from it (one CIDR, or one per family separated by a comma).
	// Required.
	ClusterCIDR string
	// ExtraArgs are added to the flags, each "--name=value" replacing a
	// default of that name.
	ExtraArgs []string
}

// controlPlaneUsers are the users of the components Options asks for.
func (o Options) controlPlaneUsers() []User {
	var users []User
	if o.ControllerManager != nil {
		users = append(users, User{Name: ControllerManagerUser})
	}
	if o.Scheduler {
		users = append(users, User{Name: SchedulerUser})
	}
	return users
}

// startComponents starts kube-controller-manager and kube-scheduler when
// Options asks for them. They run like the apiserver, in the root
// namespace, serving nothing (--secure-port=0): the apiserver is all they
// talk to. Whether they work shows in what they do (pod CIDRs, scheduled
// Pods); Stop reports one that exited.
func (cp *ControlPlane) startComponents() error {
	if err := os.WriteFile(cp.CAFile(), cp.caPEM, 0o644); err != nil {
		return fmt.Errorf("write CA: %w", err)
	}
	if o := cp.opts.ControllerManager; o != nil {
		kubeconfig, err := cp.Kubeconfig(ControllerManagerUser)
		if err != nil {
			return err
		}
		p, err := startProcess("kube-controller-manager", filepath.Join(cp.BinDir, "kube-controller-manager"),
			mergeArgs(cp.controllerManagerArgs(kubeconfig, o.ClusterCIDR), o.ExtraArgs), cp.path(controllerLogName), cp.opts.Started)
		if err != nil {
			return err
		}
		cp.mu.Lock()
		cp.controllerManager = p
		cp.mu.Unlock()
	}
	if cp.opts.Scheduler {
		kubeconfig, err := cp.Kubeconfig(SchedulerUser)
		if err != nil {
			return err
		}
		p, err := startProcess("kube-scheduler", filepath.Join(cp.BinDir, "kube-scheduler"), []string{
			"--kubeconfig=" + kubeconfig,
			"--authentication-kubeconfig=" + kubeconfig,
			"--authorization-kubeconfig=" + kubeconfig,
			"--leader-elect=false",
			"--bind-address=127.0.0.1",
			"--secure-port=0",
		}, cp.path(schedulerLogName), cp.opts.Started)
		if err != nil {
			return err
		}
		cp.mu.Lock()
		cp.scheduler = p
		cp.mu.Unlock()
	}
	return nil
}

func (cp *ControlPlane) controllerManagerArgs(kubeconfig, clusterCIDR string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=0",
		// Each controller with a ServiceAccount of its own, as kubeadm
		// runs it: the bootstrap RBAC of each is what is exercised.
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + cp.path(serviceAccountKeyName),
		"--root-ca-file=" + cp.CAFile(),
		"--service-cluster-ip-range=" + cp.opts.ServiceCIDR,
		"--cluster-cidr=" + clusterCIDR,
		"--allocate-node-cidrs=true",
		// The cloud controllers run in groundcloud-controller-manager.
		"--cloud-provider=external",
		"--configure-cloud-routes=false",
	}
}

// CAFile is the path of the CA that signed the apiserver's serving
// certificate, written by Start; clients outside the test bed's own
// (kubelets, kube-controller-manager's --root-ca-file) trust it.
func (cp *ControlPlane) CAFile() string { return cp.path(caFileName) }

// WriteKubeconfig writes a kubeconfig for one of Options.Users (or
// AdminUser) at path, for the apiserver at server: the control plane's URL,
// or an address that relays to it and that its certificate covers.
func (cp *ControlPlane) WriteKubeconfig(path, user, server string) error {
	token, ok := cp.tokens[user]
	if !ok {
		return fmt.Errorf("no testbed user %q", user)
	}
	return writeKubeconfig(path, server, cp.caPEM, user, token)
}

func (o Options) validateComponents() error {
	var errs []error
	if o.ControllerManager != nil && o.ControllerManager.ClusterCIDR == "" {
		errs = append(errs, errors.New("ControllerManager.ClusterCIDR is required"))
	}
	return errors.Join(errs...)
}

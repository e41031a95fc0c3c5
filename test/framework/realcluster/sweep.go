package realcluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

// ErrSettingsKept says that Sweep left the machine-wide settings alone
// because another cluster, which needs them, holds the machine-wide lock.
var ErrSettingsKept = errors.New("the machine-wide settings the kubelets changed are not restored: another cluster runs with them")

// Sweep removes what a cluster with lab prefix prefix left after a crash:
// its Pods' processes and its cgroups (the lab's namespaces, and the
// processes in them, are netlab.Sweep's), and, unless another cluster is
// running, the machine-wide settings its kubelets changed. It must not be
// given the prefix of a cluster still running.
func Sweep(prefix string) error {
	var errs []error
	// The nodes' kubelets and containerds first, so that nothing restarts
	// a container while its cgroup is emptied.
	errs = append(errs, netlab.Sweep(prefix))
	errs = append(errs, killCgroup("/groundcloud."+prefix))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if l, err := LockHost(ctx, "sweep of "+prefix); err == nil {
		errs = append(errs, RestoreSysctls())
		l.Unlock()
	} else {
		// Another cluster runs with those settings: leave them, and say
		// so, so that the user runs the sweep again once it has ended.
		errs = append(errs, fmt.Errorf("%w (run this again once it has ended): %w", ErrSettingsKept, err))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sweep cluster %s: %w", prefix, err)
	}
	return nil
}

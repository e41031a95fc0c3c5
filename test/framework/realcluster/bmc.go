package realcluster

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundcloud/groundcloud/test/framework/netlab"
	"github.com/groundcloud/groundcloud/test/framework/redfish"
)

// BMCUser and BMCPassword are the credentials of the BMCs StartBMC runs;
// BMCCredentials holds them as Options.BMCCredentials wants them.
const (
	BMCUser     = "admin"
	BMCPassword = "s3cret"
)

// BMCCredentials are the keys of Secret groundcloud-bmc-credentials for
// the machines of nodes: <node>-username and <node>-password.
func BMCCredentials(nodes ...string) map[string][]byte {
	out := map[string][]byte{}
	for _, n := range nodes {
		out[n+"-username"] = []byte(BMCUser + "\n")
		out[n+"-password"] = []byte(BMCPassword + "\n")
	}
	return out
}

// BMC is a Redfish BMC (sushy-tools' emulator, HTTPS with basic
// authentication) for some nodes, on a lab host the Pods reach, whose
// nodes follow their system's power (Node.SetPower).
type BMC struct {
	Emulator  *redfish.Emulator
	systems   map[string]string // node -> system id
	nodes     map[string]*Node
	followers map[string]*redfish.Follower
}

// StartBMC starts a BMC on lab host h (state in dir) with a system per
// node, powered on, and routes every node's pod CIDRs to h (RoutePodsTo).
// The cluster must have been started with BMCCredentials(nodes...).
func (c *Cluster) StartBMC(ctx context.Context, h *netlab.Host, dir string, nodes ...string) (*BMC, error) {
	b := &BMC{systems: map[string]string{}, nodes: map[string]*Node{}, followers: map[string]*redfish.Follower{}}
	var systems []redfish.System
	for i, n := range nodes {
		if c.Node(n) == nil {
			return nil, fmt.Errorf("BMC: no node %s", n)
		}
		id := fmt.Sprintf("0b1f5a2e-35c4-4d0e-8a59-%012x", i+1)
		b.systems[n], b.nodes[n] = id, c.Node(n)
		systems = append(systems, redfish.System{ID: id, Name: n, On: true})
	}
	emu, err := redfish.Start(ctx, h, dir, redfish.Options{Systems: systems, Username: BMCUser, Password: BMCPassword, TLS: true})
	if err != nil {
		return nil, err
	}
	b.Emulator = emu
	if err := c.RoutePodsTo(ctx, h); err != nil {
		_ = emu.Stop()
		return nil, err
	}
	for _, n := range nodes {
		b.followers[n] = emu.Follow(b.systems[n], c.Node(n).SetPower)
	}
	return b, nil
}

// System is the BMC's system id of node.
func (b *BMC) System(node string) string { return b.systems[node] }

// Power is what the test bed last applied to node: "On" or "Off", and
// when (see redfish Follower).
func (b *BMC) Power(node string) *redfish.Follower { return b.followers[node] }

// CloudConfig returns conf with each node's [Machine] section pointing at
// this BMC (credentials from the mounted Secret, certificate not verified,
// polled every 2 s) plus machineKeys, and globalKeys added to [Global].
func (b *BMC) CloudConfig(conf, globalKeys, machineKeys string) string {
	if globalKeys != "" {
		conf = strings.Replace(conf, "[Global]\n", "[Global]\n"+strings.TrimSuffix(globalKeys, "\n")+"\n", 1)
	}
	for n, id := range b.systems {
		keys := fmt.Sprintf("bmc-url = %s\nbmc-system = %s\nbmc-username-file = /etc/groundcloud-bmc/%s-username\n"+
			"bmc-password-file = /etc/groundcloud-bmc/%s-password\nbmc-insecure-skip-verify = true\nbmc-timeout = 2s\nbmc-poll-interval = 2s\n",
			b.Emulator.URL, id, n, n)
		if machineKeys != "" {
			keys += strings.TrimSuffix(machineKeys, "\n") + "\n"
		}
		conf = strings.Replace(conf, fmt.Sprintf("[Machine %q]\n", n), fmt.Sprintf("[Machine %q]\n", n)+keys, 1)
	}
	return conf
}

// Close stops following the systems, powers on the nodes left off, and
// stops the emulator.
func (b *BMC) Close() error {
	var errs []error
	for n, f := range b.followers {
		f.Stop()
		if st, _, _ := f.Applied(); st == "Off" {
			if err := b.nodes[n].SetPower(true); err != nil {
				errs = append(errs, fmt.Errorf("power on %s: %w", n, err))
			}
		}
	}
	return errors.Join(append(errs, b.Emulator.Stop())...)
}

// ControllerManagerLeader returns the Pod of groundcloud-controller-manager
// that holds its leader-election Lease.
func (c *Cluster) ControllerManagerLeader(ctx context.Context) (*corev1.Pod, error) {
	l, err := c.Client.CoordinationV1().Leases(metav1.NamespaceSystem).Get(ctx, "groundcloud-controller-manager", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
		return nil, errors.New("the controller manager's Lease has no holder")
	}
	pod, _, _ := strings.Cut(*l.Spec.HolderIdentity, "_") // "<pod>_<uuid>"
	return c.Client.CoreV1().Pods(metav1.NamespaceSystem).Get(ctx, pod, metav1.GetOptions{})
}

// SpreadControllerManager makes sure the controller manager's replicas run
// on different nodes, as its Deployment prefers: the scheduler may have
// put both on one node when the others were not schedulable yet (a new
// cluster). A replica beside another, not the leader, is deleted; the
// Deployment's new one goes elsewhere. Returns once every replica is ready
// on a node of its own.
func (c *Cluster) SpreadControllerManager(ctx context.Context) error {
	pods := c.Client.CoreV1().Pods(metav1.NamespaceSystem)
	selector := metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=groundcloud-controller-manager"}
	return c.poll(ctx, "the controller manager's replicas on nodes of their own", func(ctx context.Context) (string, error) {
		l, err := pods.List(ctx, selector)
		if err != nil {
			return "", err
		}
		leader, err := c.ControllerManagerLeader(ctx)
		if err != nil {
			return "", err
		}
		on := map[string]string{} // node -> a replica there
		ready := 0
		for _, p := range l.Items {
			if p.DeletionTimestamp != nil {
				return "a replica still terminating", nil
			}
			if other, ok := on[p.Spec.NodeName]; ok && p.Spec.NodeName != "" {
				victim := p.Name
				if victim == leader.Name {
					victim = other
				}
				if err := pods.Delete(ctx, victim, metav1.DeleteOptions{}); err != nil {
					return "", err
				}
				return fmt.Sprintf("replicas %s and %s both on %s: deleted %s", p.Name, other, p.Spec.NodeName, victim), nil
			}
			on[p.Spec.NodeName] = p.Name
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		if ready < 2 || ready != len(l.Items) {
			return fmt.Sprintf("%d of %d replicas ready", ready, len(l.Items)), nil
		}
		return "", nil
	})
}

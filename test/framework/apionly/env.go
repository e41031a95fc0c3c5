package apionly

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	cloudapi "k8s.io/cloud-provider/api"

	"github.com/groundcloud/groundcloud/test/framework/controlplane"
	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

// Env is a running environment. Its exported fields are read-only.
type Env struct {
	Opts    Options
	CP      *controlplane.ControlPlane
	Client  kubernetes.Interface
	Lab     *netlab.Lab
	LBs     []*netlab.Host
	Nodes   []*netlab.Host
	Clients map[string]*netlab.Host
	// CloudConfig is the controller manager's --cloud-config file.
	CloudConfig string
	// StateDir holds nodesim's health files (see nodesim.Config).
	StateDir string

	ccm      *Process
	ccmArgs  []string
	ccmRuns  int
	agents   []*netlab.Process
	agentCfg []string // kubeconfig per LB host
	closers  []func() error
}

// Start builds the environment: control plane, lab hosts, nodes
// registered as kubelet registers them, the controller manager and one
// agent per LB host. On error everything started is removed.
func Start(ctx context.Context, opts Options) (_ *Env, err error) {
	opts = opts.withDefaults()
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	e := &Env{Opts: opts, Clients: map[string]*netlab.Host{}, StateDir: filepath.Join(opts.Dir, "nodes")}
	defer func() {
		if err != nil {
			if e.ccm != nil {
				e.logf("sandbox: start failed; last lines of groundcloud-controller-manager:\n%s", controlplane.LogTail(e.ccm.LogPath, 60))
			}
			_ = e.Close()
		}
	}()
	if err := os.MkdirAll(e.StateDir, 0o755); err != nil {
		return nil, err
	}
	if err := e.startHosts(ctx); err != nil {
		return nil, err
	}
	if err := e.startControlPlane(ctx); err != nil {
		return nil, err
	}
	if err := e.registerNodes(ctx); err != nil {
		return nil, err
	}
	for i := range e.LBs {
		if err := e.StartAgent(ctx, i); err != nil {
			return nil, err
		}
	}
	return e, nil
}

func (e *Env) logf(format string, args ...any) { e.Opts.Logf(format, args...) }

func (e *Env) startHosts(ctx context.Context) error {
	o := e.Opts
	e.logf("creating %d load-balancer host(s), %d node(s) and %d client(s) in network namespaces", o.LBHosts, o.Nodes, len(o.Clients))
	l, err := o.Topology.NewLab(ctx)
	if err != nil {
		return err
	}
	e.Lab = l
	e.closers = append(e.closers, l.Close)
	for i := 1; i <= o.LBHosts; i++ {
		h, err := l.AddHost(ctx, fmt.Sprintf("lb-%d", i), netlab.HostOptions{Forwarding: true})
		if err != nil {
			return err
		}
		e.LBs = append(e.LBs, h)
	}
	for i := 1; i <= o.Nodes; i++ {
		h, err := l.AddHost(ctx, fmt.Sprintf("node-%d", i), netlab.HostOptions{})
		if err != nil {
			return err
		}
		if err := e.startNodeSim(ctx, h); err != nil {
			return err
		}
		e.Nodes = append(e.Nodes, h)
	}
	clients, unlink, err := o.Topology.AddClients(ctx, l)
	if err != nil {
		return err
	}
	e.Clients = clients
	if unlink != nil {
		e.closers = append(e.closers, unlink)
	}
	return nil
}

func (e *Env) startNodeSim(ctx context.Context, h *netlab.Host) error {
	ns := e.Opts.NodeSim
	args := []string{"--name=" + h.Name, "--state-dir=" + e.StateDir}
	for flag, ports := range map[string][]uint16{"tcp-ports": ns.TCPPorts, "udp-ports": ns.UDPPorts, "http-ports": ns.HTTPPorts, "health-node-ports": ns.HealthPorts} {
		if len(ports) > 0 {
			args = append(args, "--"+flag+"="+joinPorts(ports))
		}
	}
	p, err := h.Start(context.Background(), filepath.Join(e.Opts.Dir, h.Name+".log"), e.Opts.Binaries.NodeSim, args...)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := p.WaitForOutput(wctx, "nodesim: ready"); err != nil {
		return fmt.Errorf("nodesim on %s: %w", h.Name, err)
	}
	return nil
}

func joinPorts(ports []uint16) string {
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = fmt.Sprint(p)
	}
	return strings.Join(s, ",")
}

func (e *Env) startControlPlane(ctx context.Context) error {
	e.logf("starting etcd and kube-apiserver")
	cp, err := controlplane.Start(ctx, controlplane.Options{
		BinDir: e.Opts.ToolsDir, Dir: filepath.Join(e.Opts.Dir, "control-plane"),
		ServiceCIDR: e.Opts.ServiceCIDR, ExtraAPIServerArgs: e.Opts.ExtraAPIServerArgs,
	})
	if err != nil {
		return err
	}
	e.CP = cp
	e.Client = cp.Client()
	e.closers = append(e.closers, cp.Stop)

	e.CloudConfig = filepath.Join(e.Opts.Dir, "cloud.conf")
	if err := os.WriteFile(e.CloudConfig, []byte(e.cloudConfig()), 0o644); err != nil {
		return err
	}
	if !e.Opts.AdminIdentity {
		if err := e.applyRBAC(ctx); err != nil {
			return err
		}
	}
	kubeconfig, err := e.kubeconfig(ctx, controllerManagerUser)
	if err != nil {
		return err
	}
	e.ccmArgs = append([]string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--cloud-config=" + e.CloudConfig,
		"--cloud-config-reload-interval=500ms",
		"--leader-elect=true",
		"--bind-address=127.0.0.1",
		"--secure-port=0",
		"--node-monitor-period=1s",
		"--v=2",
	}, e.Opts.ExtraCCMArgs...)
	e.logf("starting groundcloud-controller-manager")
	return e.startCCM()
}

func (e *Env) startCCM() error {
	e.ccmRuns++
	name := "controller-manager.log"
	if e.ccmRuns > 1 {
		name = fmt.Sprintf("controller-manager.%d.log", e.ccmRuns)
	}
	p, err := StartProcess(filepath.Join(e.Opts.Dir, name), e.Opts.Binaries.ControllerManager, e.ccmArgs...)
	if err != nil {
		return err
	}
	e.ccm = p
	return nil
}

// CCMLog is the current controller manager's log file.
func (e *Env) CCMLog() string { return e.ccm.LogPath }

// CCMPid is the current controller manager's process id.
func (e *Env) CCMPid() int { return e.ccm.Pid() }

// RestartCCM stops the controller manager and starts it again with the
// same flags (its exit status on SIGTERM does not matter here).
func (e *Env) RestartCCM() error {
	_ = e.ccm.Stop()
	return e.startCCM()
}

func (e *Env) cloudConfig() string {
	var b strings.Builder
	b.WriteString("[Global]\nregion = lab\n\n")
	for _, n := range e.Nodes {
		if slices.Contains(e.Opts.Unlisted, n.Name) {
			continue
		}
		fmt.Fprintf(&b, "[Machine %q]\nzone = rack-1\ninstance-type = nodesim\ninternal-ip = %s\ninternal-ip = %s\n\n", n.Name, n.Addr4, n.Addr6)
	}
	// Proxy forwarding: nodesim listens on NodePorts; nothing on these
	// nodes serves a passthrough address as kube-proxy does.
	fmt.Fprintf(&b, "[Pool \"default\"]\naddresses = %s\naddresses = %s\nforwarding = proxy\n\n", e.Opts.Pool4, e.Opts.Pool6)
	b.WriteString(e.Opts.ExtraCloudConfig)
	return b.String()
}

func (e *Env) registerNodes(ctx context.Context) error {
	nodes := e.Nodes[:len(e.Nodes)-e.Opts.Unregistered]
	e.logf("registering %d nodes the way kubelet --cloud-provider=external does", len(nodes))
	for _, n := range nodes {
		if err := RegisterNode(ctx, e.Client, n.Name, v1.ConditionTrue); err != nil {
			return err
		}
	}
	for _, n := range nodes {
		if err := WaitInitialised(ctx, e.Client, n.Name); err != nil {
			return fmt.Errorf("node %s not initialised by the controller manager: %w", n.Name, err)
		}
	}
	return nil
}

// StartAgent starts the agent of LB host i (again, after StopAgent).
func (e *Env) StartAgent(ctx context.Context, i int) error {
	h := e.LBs[i]
	if len(e.agentCfg) <= i {
		// The agent runs inside the host; the apiserver listens on the root
		// namespace's loopback: forward its address into the host.
		u, err := url.Parse(e.CP.URL)
		if err != nil {
			return err
		}
		f, err := h.ForwardLoopback(context.Background(), u.Host)
		if err != nil {
			return err
		}
		e.closers = append(e.closers, f.Close)
		kubeconfig, err := e.kubeconfig(ctx, agentUser)
		if err != nil {
			return err
		}
		e.agentCfg = append(e.agentCfg, kubeconfig)
		e.agents = append(e.agents, nil)
	}
	args := append([]string{
		"--kubeconfig=" + e.agentCfg[i],
		"--host-name=" + h.Name,
		"--interface=" + h.Iface,
		"--health-interval=" + e.Opts.HealthInterval.String(),
		"--health-timeout=" + e.Opts.HealthTimeout.String(),
		"--metrics-bind-address=",
		"--v=2",
	}, e.Opts.ExtraAgentArgs...)
	if e.Opts.AgentArgs != nil {
		args = append(args, e.Opts.AgentArgs(e, i)...)
	}
	e.logf("starting groundcloud-agent on %s", h.Name)
	p, err := h.Start(context.Background(), filepath.Join(e.Opts.Dir, "agent-"+h.Name+".log"), e.Opts.Binaries.Agent, args...)
	if err != nil {
		return err
	}
	e.agents[i] = p
	return nil
}

// Agent is the process of LB host i's agent.
func (e *Env) Agent(i int) *netlab.Process { return e.agents[i] }

// Close stops everything Start started, in reverse order.
func (e *Env) Close() error {
	var errs []error
	if e.ccm != nil {
		_ = e.ccm.Stop()
	}
	for _, a := range e.agents {
		if a != nil {
			_ = a.Stop()
		}
	}
	for i := len(e.closers) - 1; i >= 0; i-- {
		if err := e.closers[i](); err != nil {
			errs = append(errs, err)
		}
	}
	e.closers = nil
	return errors.Join(errs...)
}

// RegisterNode creates a Node as kubelet with --cloud-provider=external
// does: tainted uninitialized, then its status with the given Ready
// condition and addresses (kubelet reports addresses before initialisation
// when it is given --node-ip; without, the cloud-node controller writes
// the inventory's after).
func RegisterNode(ctx context.Context, c kubernetes.Interface, name string, ready v1.ConditionStatus, addresses ...v1.NodeAddress) error {
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelHostname: name}},
		Spec: v1.NodeSpec{Taints: []v1.Taint{{
			Key: cloudapi.TaintExternalCloudProvider, Value: "true", Effect: v1.TaintEffectNoSchedule,
		}}},
	}
	created, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("register node %s: %w", name, err)
	}
	now := metav1.Now()
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		created.Status.Conditions = []v1.NodeCondition{{
			Type: v1.NodeReady, Status: ready, Reason: "KubeletReady",
			LastHeartbeatTime: now, LastTransitionTime: now,
		}}
		// As kubelet --cloud-provider=external without --node-ip: addresses
		// it was not given are the cloud-node controller's, which may have
		// written them already (a conflict re-reads them): never cleared.
		if len(addresses) > 0 {
			created.Status.Addresses = addresses
		}
		_, err := c.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			if fresh, gerr := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); gerr == nil {
				created = fresh
			}
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("set status of node %s: %w", name, err)
	}
	return nil
}

// WaitInitialised waits until the cloud-node controller has initialised the node.
func WaitInitialised(ctx context.Context, c kubernetes.Interface, name string) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, t := range n.Spec.Taints {
			if t.Key == cloudapi.TaintExternalCloudProvider {
				return false, nil
			}
		}
		return n.Spec.ProviderID != "", nil
	})
}

package realcluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	cloudapi "k8s.io/cloud-provider/api"

	"github.com/groundcloud/groundcloud/test/framework/controlplane"
)

// readyTimeout bounds each wait of Start: generous, for a busy machine.
const readyTimeout = 8 * time.Minute

// waitReady waits for each node's pod CIDRs and gives the node its network
// (as a network plugin's agent would) and, to a load-balancer host, its
// label (as the administrator would), then for every node to be Ready
// and initialised, then for every component to run (kube-proxy: to have
// programmed its rules).
func (c *Cluster) waitReady(ctx context.Context) error {
	c.logf("waiting for pod CIDRs from node-ipam; writing each node's CNI configuration, labelling the load-balancer hosts")
	for _, n := range c.Nodes {
		cidrs, err := c.waitPodCIDRs(ctx, n.Name)
		if err != nil {
			return err
		}
		if err := n.writeCNIConfig(cidrs); err != nil {
			return err
		}
		if n.LoadBalancer {
			if err := c.labelLoadBalancerHost(ctx, n.Name); err != nil {
				return err
			}
		}
	}
	c.logf("waiting for every node to be Ready and initialised by groundcloud-controller-manager")
	if err := c.poll(ctx, "nodes Ready and initialised", c.nodesReady); err != nil {
		return err
	}
	c.logf("waiting for kube-proxy (its first sync), groundcloud-router, groundcloud-agent and groundcloud-controller-manager")
	return c.poll(ctx, "components running", c.componentsReady)
}

// poll calls cond until it reports "" (done) or the timeout; the error then
// says what cond last reported.
func (c *Cluster) poll(ctx context.Context, what string, cond func(context.Context) (string, error)) error {
	last, lastErr := "not checked yet", error(nil)
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, readyTimeout, true, func(ctx context.Context) (bool, error) {
		// Each check has time of its own: one cut short by the end of the
		// wait would only report that.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		missing, err := cond(cctx)
		if err != nil {
			lastErr = err
			return false, nil
		}
		last, lastErr = missing, nil
		return missing == "", nil
	})
	if err != nil {
		return fmt.Errorf("cluster: %s: %w; still missing: %s (last error: %v)", what, err, last, lastErr)
	}
	return nil
}

// describe is what an administrator would look at first: nodes, Pods and
// warning events, as kubectl prints them.
func (c *Cluster) describe() string {
	if c.CP == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var b strings.Builder
	for _, args := range [][]string{
		{"get", "nodes", "-o", "wide"},
		{"get", "pods", "-A", "-o", "wide"},
		{"get", "events", "-A", "--field-selector=type=Warning", "--sort-by=.lastTimestamp"},
	} {
		out, err := c.CP.Kubectl(ctx, args...)
		fmt.Fprintf(&b, "$ kubectl %s\n%s", strings.Join(args, " "), out)
		if err != nil {
			fmt.Fprintf(&b, "(%v)\n", err)
		}
	}
	for _, log := range c.Logs() {
		fmt.Fprintf(&b, "--- tail of %s\n%s\n", log, controlplane.LogTail(log, 15))
	}
	return b.String()
}

func (c *Cluster) waitPodCIDRs(ctx context.Context, name string) ([]netip.Prefix, error) {
	var cidrs []netip.Prefix
	err := c.poll(ctx, "pod CIDRs of node "+name, func(ctx context.Context) (string, error) {
		node, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		cidrs = cidrs[:0]
		for _, s := range node.Spec.PodCIDRs {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				return "", err
			}
			cidrs = append(cidrs, p)
		}
		if len(cidrs) == 0 {
			return "no pod CIDRs yet", nil
		}
		return "", nil
	})
	return cidrs, err
}

// nodesReady reports the nodes not yet Ready, or not yet initialised
// (provider ID set, the uninitialized taint gone).
func (c *Cluster) nodesReady(ctx context.Context) (string, error) {
	var missing []string
	for _, n := range c.Nodes {
		node, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			missing = append(missing, n.Name+": "+err.Error())
			continue
		}
		if !nodeReady(node) {
			missing = append(missing, n.Name+" not Ready")
		}
		if node.Spec.ProviderID == "" || hasTaint(node, cloudapi.TaintExternalCloudProvider) {
			missing = append(missing, n.Name+" not initialised")
		}
	}
	return strings.Join(missing, "; "), nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// componentsReady reports the DaemonSets and Deployments of kube-system
// that do not run everywhere they should yet. A DaemonSet counts on the
// cluster's nodes only, by its Pods: Nodes without a kubelet of the test
// bed's (a benchmark's API-only Nodes) never run theirs.
func (c *Cluster) componentsReady(ctx context.Context) (string, error) {
	var missing []string
	var lbs []*Node
	for _, n := range c.Nodes {
		if n.LoadBalancer {
			lbs = append(lbs, n)
		}
	}
	for _, ds := range []struct {
		name  string
		nodes []*Node
	}{{"kube-proxy", c.Nodes}, {"groundcloud-router", c.Nodes}, {"groundcloud-agent", lbs}} {
		why, err := c.daemonSetReady(ctx, ds.name, ds.nodes)
		if err != nil {
			return "", err
		}
		if why != "" {
			missing = append(missing, why)
		}
	}
	d, err := c.Client.AppsV1().Deployments(metav1.NamespaceSystem).Get(ctx, "groundcloud-controller-manager", metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if d.Spec.Replicas == nil || d.Status.ReadyReplicas != *d.Spec.Replicas {
		missing = append(missing, fmt.Sprintf("Deployment groundcloud-controller-manager: %d ready", d.Status.ReadyReplicas))
	}
	// kube-proxy's Pod is Ready once it runs (it has no readiness probe,
	// and its /healthz says healthy while it starts), before it has
	// programmed any Service: a connection to a cluster IP then goes
	// unanswered on the link. Its metrics say when a sync has succeeded.
	if len(missing) == 0 {
		for _, n := range c.Nodes {
			if why := c.kubeProxySynced(ctx, n); why != "" {
				missing = append(missing, fmt.Sprintf("kube-proxy on %s: %s", n.Name, why))
			}
		}
	}
	return strings.Join(missing, "; "), nil
}

// daemonSetReady reports the nodes where DaemonSet name of kube-system
// has no Ready Pod ("" when none).
func (c *Cluster) daemonSetReady(ctx context.Context, name string, nodes []*Node) (string, error) {
	ds, err := c.Client.AppsV1().DaemonSets(metav1.NamespaceSystem).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return "", err
	}
	pods, err := c.Client.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return "", err
	}
	ready := map[string]bool{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && podReady(&p) {
			ready[p.Spec.NodeName] = true
		}
	}
	var not []string
	for _, n := range nodes {
		if !ready[n.Name] {
			not = append(not, n.Name)
		}
	}
	if len(not) == 0 {
		return "", nil
	}
	return fmt.Sprintf("DaemonSet %s: no Pod Ready on %s", name, strings.Join(not, ", ")), nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// kubeProxyMetrics is kube-proxy's metrics address (its default
// metricsBindAddress) in its node's network namespace.
const kubeProxyMetrics = "http://127.0.0.1:10249/metrics"

// kubeProxySynced reports why kube-proxy on n has not yet programmed its
// rules for every IP family of the cluster ("" once it has).
func (c *Cluster) kubeProxySynced(ctx context.Context, n *Node) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, kubeProxyMetrics, nil)
	if err != nil {
		return err.Error()
	}
	resp, err := n.Host.HTTPClient().Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	synced, err := syncedFamilies(resp.Body)
	if err != nil {
		return err.Error()
	}
	families := len(c.nodeAddrs(n.Host))
	if synced < families {
		return fmt.Sprintf("%d of %d IP families synced", synced, families)
	}
	return ""
}

// syncedFamilies counts the IP families whose kube-proxy metrics page
// reports a successful sync: kubeproxy_sync_proxy_rules_last_timestamp_seconds
// has a series per family only once one has.
func syncedFamilies(metrics io.Reader) (int, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(metrics)
	if err != nil {
		return 0, fmt.Errorf("parse kube-proxy's metrics: %w", err)
	}
	n := 0
	for _, m := range families["kubeproxy_sync_proxy_rules_last_timestamp_seconds"].GetMetric() {
		if m.GetGauge().GetValue() > 0 {
			n++
		}
	}
	return n, nil
}

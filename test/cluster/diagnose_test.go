package clustertest

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundcloud/groundcloud/test/framework/controlplane"
	"github.com/groundcloud/groundcloud/test/framework/realcluster"
)

// diagnose logs what a failed check leaves to look at, from the places
// that stay readable when the cluster's own API paths do not (a kubelet
// that does not answer cannot serve its Pods' logs): the Pods and Nodes as
// the apiserver has them, the LoadBalancer of service, every load-balancer
// host's links, addresses and groundcloud tables, and the tails of the
// agents', kube-proxies' and node's own log files on disk.
func diagnose(t *testing.T, c *realcluster.Cluster, node, service string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, args := range [][]string{
		{"get", "nodes", "-o", "wide"},
		{"get", "pods", "-A", "-o", "wide"},
		{"get", "loadbalancers", "-A", "-o", "yaml"},
		{"get", "events", "-A", "--sort-by=.lastTimestamp"},
	} {
		if args[1] == "loadbalancers" && service != "" {
			args = []string{"get", "loadbalancers", "-n", "default", service, "-o", "yaml"}
		}
		out, err := c.CP.Kubectl(ctx, args...)
		t.Logf("$ kubectl %s (%v)\n%s", strings.Join(args, " "), err, tail(string(out), 60))
	}
	if n, err := c.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err == nil {
		t.Logf("Node %s: providerID %q taints %v addresses %v labels %v", node, n.Spec.ProviderID, n.Spec.Taints, n.Status.Addresses, n.Labels)
	}
	for _, n := range c.Nodes {
		if n.LoadBalancer {
			for _, cmd := range [][]string{
				{"ip", "-br", "link"},
				{"ip", "-br", "addr"},
				{"nft", "list", "chains"},
			} {
				out, err := n.Host.Command(ctx, cmd[0], cmd[1:]...).CombinedOutput()
				t.Logf("%s: $ %s (%v)\n%s", n.Name, strings.Join(cmd, " "), err, tail(string(out), 40))
			}
		}
		if !n.LoadBalancer && n.Name != node {
			continue
		}
		for _, log := range n.Logs() {
			t.Logf("%s: tail of %s:\n%s", n.Name, log, controlplane.LogTail(log, 40))
		}
		logPodTails(t, n, 40, "groundcloud-agent", "kube-proxy")
	}
}

// logPodTails logs the last lines of the node's log files of the Pods
// whose directory names contain one of names.
func logPodTails(t *testing.T, n *realcluster.Node, lines int, names ...string) {
	t.Helper()
	for _, log := range n.PodLogs() {
		base := filepath.Base(filepath.Dir(filepath.Dir(log)))
		if slices.ContainsFunc(names, func(s string) bool { return strings.Contains(base, s) }) {
			t.Logf("%s: tail of %s:\n%s", n.Name, log, controlplane.LogTail(log, lines))
		}
	}
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

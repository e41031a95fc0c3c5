package clustertest

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/groundcloud/groundcloud/test/framework/metricscheck"
	"github.com/groundcloud/groundcloud/test/framework/realcluster"
)

// checkNoAlertFires: on the settled cluster, no alerting rule of
// deploy/monitoring holds over the /metrics of every agent and every
// controller manager, scraped twice ten seconds apart (for the rules over
// counters), as hack/tools/promcheck evaluates them. The rules wait a
// minute or more (for:) before they fire, so a condition that passes
// within two minutes is no alert: the check retries until then and names
// each alert that still holds, with its samples.
func checkNoAlertFires(t *testing.T, c *realcluster.Cluster) {
	bin, rulesFile, err := metricscheck.AlertTools(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var last metricscheck.Evaluation
	var lastErr error
	_ = wait.PollUntilContextTimeout(t.Context(), time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		before, err := scrapeAll(ctx, c)
		if err != nil {
			lastErr = err
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(10 * time.Second):
		}
		now, err := scrapeAll(ctx, c)
		if err != nil {
			lastErr = err
			return false, nil
		}
		last, lastErr = metricscheck.EvalAlerts(ctx, bin, rulesFile, now, before)
		return lastErr == nil && len(last.Firing) == 0, nil
	})
	if lastErr != nil {
		t.Fatal(lastErr)
	}
	for _, f := range last.Firing {
		t.Errorf("fires on the healthy cluster: %s", f)
	}
	t.Logf("%d alerting rules silent", len(last.Evaluated))
}

// scrapeAll reads the /metrics of the agent of every load-balancer host and
// of every controller manager Pod.
func scrapeAll(ctx context.Context, c *realcluster.Cluster) ([]metricscheck.Target, error) {
	var out []metricscheck.Target
	for _, n := range c.Nodes {
		if !n.LoadBalancer {
			continue
		}
		page, err := scrape(ctx, n.Host.HTTPClient(), "http://127.0.0.1:10263/metrics", "")
		if err != nil {
			return nil, fmt.Errorf("agent of %s: %w", n.Name, err)
		}
		out = append(out, metricscheck.Target{Job: "groundcloud-agent", Instance: n.Name + ":10263", Page: page})
	}
	ccms, err := controllerManagerMetrics(ctx, c)
	if err != nil {
		return nil, err
	}
	return append(out, ccms...), nil
}

// controllerManagerMetrics reads the /metrics of each running controller
// manager Pod on its secure port, from its node, with the cluster
// administrator's token (authorised by SubjectAccessReview).
func controllerManagerMetrics(ctx context.Context, c *realcluster.Cluster) ([]metricscheck.Target, error) {
	pods, err := c.Client.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=groundcloud-controller-manager"})
	if err != nil {
		return nil, fmt.Errorf("controller manager Pods: %w", err)
	}
	var out []metricscheck.Target
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
			continue
		}
		node := c.Node(p.Spec.NodeName)
		if node == nil {
			return nil, fmt.Errorf("controller manager Pod %s runs on %q, no node of the cluster", p.Name, p.Spec.NodeName)
		}
		client := node.Host.HTTPClient()
		client.Transport.(*http.Transport).TLSClientConfig = &tls.Config{InsecureSkipVerify: true}
		instance := net.JoinHostPort(p.Status.PodIP, "10258")
		page, err := scrape(ctx, client, "https://"+instance+"/metrics", c.CP.RESTConfig().BearerToken)
		if err != nil {
			return nil, fmt.Errorf("controller manager %s: %w", p.Name, err)
		}
		out = append(out, metricscheck.Target{Job: "groundcloud-controller-manager", Instance: instance, Page: page})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no running controller manager Pod")
	}
	return out, nil
}

// scrape GETs a /metrics page, with a bearer token if one is given.
func scrape(ctx context.Context, client *http.Client, url, token string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(b)))
	}
	return string(b), nil
}

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/groundcloud/groundcloud/test/framework/realcluster"
)

// exampleResult is what the summary shows of the example.
type exampleResult struct {
	manifest string // its path
	vip      netip.Addr
	answer   string // the first answer through the address
}

// example applies default/hello (a Deployment of groundcloud-echo with one
// replica per worker, and a LoadBalancer Service in front of it) with
// kubectl, as a user would, waits for its address and until a request from
// this machine's shell is answered by one of its Pods.
func example(ctx context.Context, c *realcluster.Cluster, replicas int) (exampleResult, error) {
	res := exampleResult{manifest: filepath.Join(c.Opts.Dir, "hello.yaml")}
	manifest, err := c.ExampleManifest("default", "hello", int32(replicas))
	if err != nil {
		return res, err
	}
	if err := os.WriteFile(res.manifest, []byte(manifest), 0o644); err != nil {
		return res, err
	}
	out, err := c.CP.Kubectl(ctx, "apply", "-f", res.manifest)
	if err != nil {
		return res, fmt.Errorf("kubectl apply -f %s: %w", res.manifest, err)
	}
	progress("%s", strings.TrimSpace(string(out)))
	if err := c.WaitDeploymentReady(ctx, "default", "hello"); err != nil {
		return res, err
	}
	if res.vip, err = c.WaitLoadBalancerIP(ctx, "default", "hello"); err != nil {
		return res, fmt.Errorf("%w (see the controller manager's log: kubectl -n kube-system logs deploy/groundcloud-controller-manager)", err)
	}
	progress("default/hello has address %s; waiting until it answers", res.vip)
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	url := "http://" + netip.AddrPortFrom(res.vip, 80).String() + "/"
	err = wait.PollUntilContextTimeout(ctx, 300*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		resp, err := client.Get(url)
		if err != nil {
			return false, nil
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		res.answer = string(body)
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return res, fmt.Errorf("%s does not answer (see the agent's log: kubectl -n kube-system logs ds/groundcloud-agent): %w", url, err)
	}
	return res, nil
}

package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/groundcloud/groundcloud/test/framework/realcluster"
	"github.com/groundcloud/groundcloud/test/framework/redfish"
)

// workerNames are the sandbox's workers: node-1 to node-n.
func workerNames(n int) []string {
	var out []string
	for i := 1; i <= n; i++ {
		out = append(out, fmt.Sprintf("node-%d", i))
	}
	return out
}

// bmcResult is what the summary says about the BMCs.
type bmcResult struct {
	url     string
	systems map[string]string // node -> system id
	nodes   []string
}

// startBMC runs a Redfish BMC (sushy-tools' emulator) for the workers on
// the sandbox's host "bmc", which the nodes follow (a system powered off
// stops that node's kubelet and pulls its cable), and points their
// [Machine] sections at it with bmc-out-of-service = taint: a worker
// powered off through its BMC is tainted out of service once its Node is
// NotReady and the BMC has said Off for the grace, so that its Pods,
// StatefulSets' too, run elsewhere.
func startBMC(ctx context.Context, c *realcluster.Cluster, dir string, workers int) (*realcluster.BMC, bmcResult, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, bmcResult{}, err
	}
	nodes := workerNames(workers)
	progress("starting a Redfish BMC (sushy-tools) for %s on host bmc", strings.Join(nodes, ", "))
	b, err := c.StartBMC(ctx, c.Clients["bmc"], dir, nodes...)
	if err != nil {
		return nil, bmcResult{}, err
	}
	progress("pointing the machines at their BMC (bmc-out-of-service = taint); the agents restart")
	if err := c.SetCloudConfig(ctx, b.CloudConfig(c.CloudConfig, "", "bmc-out-of-service = taint")); err != nil {
		return b, bmcResult{}, err
	}
	// A worker powered off must not take both controller-manager
	// replicas with it: one must be left to taint it.
	progress("making sure the controller manager's replicas run on different nodes")
	if err := c.SpreadControllerManager(ctx); err != nil {
		return b, bmcResult{}, err
	}
	res := bmcResult{url: b.Emulator.URL, systems: map[string]string{}, nodes: nodes}
	for _, n := range nodes {
		res.systems[n] = b.System(n)
	}
	return b, res, nil
}

func bmcSummary(res bmcResult, dir string) string {
	n := res.nodes[0]
	reset := func(typ string) string {
		return fmt.Sprintf(`curl -sk -u %s:%s -H 'Content-Type: application/json' -d '{"ResetType":"%s"}' %s%s/Actions/ComputerSystem.Reset`,
			realcluster.BMCUser, realcluster.BMCPassword, typ, res.url, redfish.SystemPath(res.systems[n]))
	}
	return fmt.Sprintf(`
  BMCs (--bmc): a Redfish BMC for %[1]s at %[2]s (user %[3]s,
  password %[4]s; sushy-tools' emulator, whose systems the nodes follow).
  Power %[5]s off as its BMC would, and watch the controller manager taint
  it out of service once it is NotReady and its BMC has said Off for 30 s,
  so that its Pods run elsewhere (StatefulSets' too):

    %[6]s
    kubectl get nodes -w
    kubectl describe node %[5]s | grep -e BMCReachable -e out-of-service
    kubectl get events -A --field-selector involvedObject.name=%[5]s

  Power it on again (the taint goes once the Node is Ready):

    %[7]s

  The BMC's log: %[8]s/emulator.log
`, strings.Join(res.nodes, ", "), res.url, realcluster.BMCUser, realcluster.BMCPassword, n, reset("ForceOff"), reset("On"), dir)
}

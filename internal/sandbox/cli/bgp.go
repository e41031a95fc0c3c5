package cli

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/groundcloud/groundcloud/internal/cluster"
	"github.com/groundcloud/groundcloud/internal/frr"
)

// The BGP sandbox (--bgp): a router host running FRR that every
// load-balancer host peers with, a client host behind it (its route to
// the BGP pool goes through the router), and pool "bgp" announced over
// BGP. The pool is outside the sandbox's subnet: the machine's own shell
// has no route to it (the sandbox never adds one), so the summary shows
// how to reach it from the client host.
var (
	bgpPool4 = netip.MustParsePrefix("100.64.100.0/28")
	bgpPool6 = netip.MustParsePrefix("2001:db8:bb::/124")
)

// bgpCloudConfig is pool "bgp" and the router's [BGPPeer] sections.
func bgpCloudConfig(c *cluster.Cluster) string {
	return fmt.Sprintf("[Pool \"bgp\"]\naddresses = %s\naddresses = %s\nannounce = bgp\nauto-assign = false\n\n", bgpPool4, bgpPool6) +
		cluster.BGPPeers(c.Clients["router"])
}

// bgpResult is what the summary shows of the BGP example.
type bgpResult struct {
	vip    netip.Addr
	route  string // the router's route to it
	answer string // the first answer, from the client host
	client string // the client host's namespace
}

// startBGP starts the router, routes the client through it, and puts
// default/hello-bgp (the example's Pods, behind a Service of pool "bgp")
// in front of the client.
func startBGP(ctx context.Context, c *cluster.Cluster) (*frr.Router, bgpResult, error) {
	var res bgpResult
	progress("starting the router (FRR) that the load-balancer hosts peer with")
	r, err := c.StartRouter(ctx, c.Clients["router"])
	if err != nil {
		return nil, res, err
	}
	client := c.Clients["client"]
	res.client = client.Netns
	if err := cluster.RouteThrough(ctx, client, r.Host, bgpPool4, bgpPool6); err != nil {
		return r, res, err
	}
	svc := cluster.LoadBalancerService("default", "hello-bgp")
	svc.Spec.Selector = map[string]string{"app": "hello"}
	svc.Annotations = map[string]string{"groundcloud.io/pool": "bgp"}
	if _, err := c.Client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return r, res, err
	}
	if res.vip, err = c.WaitLoadBalancerIP(ctx, "default", "hello-bgp"); err != nil {
		return r, res, err
	}
	progress("default/hello-bgp has address %s; waiting for the router's route and an answer from the client host", res.vip)
	err = wait.PollUntilContextTimeout(ctx, 300*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		hops, err := r.Nexthops(ctx, netip.PrefixFrom(res.vip, 32))
		if err != nil || len(hops) == 0 {
			return false, nil
		}
		out, err := client.Command(ctx, "curl", "-s", "-m", "2", "http://"+res.vip.String()+"/").Output()
		if err != nil {
			return false, nil
		}
		res.answer = strings.TrimSpace(string(out))
		return true, nil
	})
	if err != nil {
		return r, res, fmt.Errorf("%s is not routed or does not answer from the client host (router logs in %s): %w", res.vip, r.Log("bgpd"), err)
	}
	route, _ := r.VTY(ctx, "show ip route "+res.vip.String()+"/32")
	res.route = string(route)
	return r, res, nil
}

func printBGPSummary(res bgpResult) {
	fmt.Printf(`
  BGP: default/hello-bgp (pool "bgp", announce = bgp) has the address %[1]s.
  Every load-balancer host advertises it to the router; its route there:

%[2]s
  From the client host, behind the router:

    ip netns exec %[3]s curl http://%[1]s/

  answers: %[4]s
`, res.vip, indent(res.route), res.client, res.answer)
}

func indent(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString("    " + l + "\n")
	}
	return b.String()
}

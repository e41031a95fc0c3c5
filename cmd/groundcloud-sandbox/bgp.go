package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/groundcloud/groundcloud/internal/annotation"
	"github.com/groundcloud/groundcloud/test/framework/frr"
	"github.com/groundcloud/groundcloud/test/framework/realcluster"
	"github.com/groundcloud/groundcloud/test/images/echo"
)

// The BGP sandbox (--bgp): a router host running FRR that every
// load-balancer host peers with, a client host behind it (its route to
// the BGP pool goes through the router), and pool "bgp" announced over
// BGP. The pool is outside the sandbox's subnet: the machine's own shell
// has no route to it (the sandbox never adds one), so the summary shows
// how to reach it from the client host.
var (
	bgpNet4  = netip.MustParsePrefix("100.64.100.0/28")
	bgpNet6  = netip.MustParsePrefix("2001:db8:bb::/124")
	bgpPool4 = "100.64.100.1-100.64.100.14"
	bgpPool6 = "2001:db8:bb::1-2001:db8:bb::f"
)

// bgpCloudConfig is pool "bgp" and the router's [BGPPeer] sections, BFD
// on the IPv4 one (the router's side: realcluster.EnableBFD).
func bgpCloudConfig(c *realcluster.Cluster) string {
	return fmt.Sprintf("[Pool \"bgp\"]\naddresses = %s\naddresses = %s\nannounce = bgp\nauto-assign = false\n\n", bgpPool4, bgpPool6) +
		realcluster.BGPPeersBFD(c.Clients["frr"])
}

// bgpResult is what the summary shows of the BGP example.
type bgpResult struct {
	manifest string
	vip      netip.Addr
	hosts    []string // the load-balancer hosts, which advertise it
	routeCmd string   // the vtysh command that shows the router's route
	route    string   // its output
	bfdCmd   string   // the vtysh command that shows the router's BFD sessions
	curl     string   // the command that reaches the address
	answer   string   // its first answer
	logs     string   // the router's directory, with its logs
}

// frrRecord is the file in the state directory dir that names the
// running router's directory. FRR drops to a user that may not enter dir,
// so the router's directory is elsewhere (test/framework/frr); a sweep after a
// crash removes it by this record.
func frrRecord(dir string) string { return filepath.Join(dir, "frr") }

// stopRouter stops the router and removes its record.
func stopRouter(r *frr.Instance, dir string) error {
	err := r.Stop()
	if rerr := os.Remove(frrRecord(dir)); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	return err
}

// sweepRouter removes the directory of the router a crashed sandbox with
// state in dir left (its daemons died with the router's namespace), and
// the record.
func sweepRouter(dir string) error {
	b, err := os.ReadFile(frrRecord(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := frr.RemoveDir(strings.TrimSpace(string(b))); err != nil {
		return fmt.Errorf("router of the sandbox in %s: %w", dir, err)
	}
	return os.Remove(frrRecord(dir))
}

// startBGP starts the router, routes the client through it, applies
// default/hello-bgp (a Service of pool "bgp" in front of the example's
// Pods) with kubectl, and waits until the router has a route to its
// address through every load-balancer host and the client gets an answer
// from one of the Pods.
func startBGP(ctx context.Context, c *realcluster.Cluster, dir string) (*frr.Instance, bgpResult, error) {
	res := bgpResult{manifest: filepath.Join(c.Opts.Dir, "hello-bgp.yaml")}
	progress("starting the router (FRR) that the load-balancer hosts peer with")
	r, err := c.StartFRR(ctx, c.Clients["frr"])
	if err != nil {
		return nil, res, err
	}
	if err := realcluster.EnableBFD(ctx, r); err != nil {
		return r, res, err
	}
	res.logs = r.Dir()
	if err := os.WriteFile(frrRecord(dir), []byte(r.Dir()+"\n"), 0o644); err != nil {
		return r, res, err
	}
	client := c.Clients["client"]
	if err := realcluster.RouteThrough(ctx, client, r.Host, bgpNet4, bgpNet6); err != nil {
		return r, res, err
	}
	if err := applyBGPService(ctx, c, res.manifest); err != nil {
		return r, res, err
	}
	if res.vip, err = c.WaitLoadBalancerIP(ctx, "default", "hello-bgp"); err != nil {
		return r, res, err
	}
	var want []netip.Addr
	for _, n := range c.Nodes {
		if n.LoadBalancer {
			want = append(want, n.Host.Addr4)
			res.hosts = append(res.hosts, n.Name)
		}
	}
	slices.SortFunc(want, netip.Addr.Compare)
	route := netip.PrefixFrom(res.vip, 32)
	res.curl = fmt.Sprintf("ip netns exec %s curl http://%s/", client.Netns, res.vip)
	progress("default/hello-bgp has address %s; waiting for the router's route through %s and an answer from the client host", res.vip, strings.Join(res.hosts, ", "))
	var hops []netip.Addr
	err = wait.PollUntilContextTimeout(ctx, 300*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if hops, err = r.Nexthops(ctx, route); err != nil || !slices.Equal(hops, want) {
			return false, nil
		}
		out, err := client.Command(ctx, "curl", "-sf", "-m", "2", "http://"+res.vip.String()+"/").Output()
		if _, perr := echo.Parse(string(out)); err != nil || perr != nil {
			return false, nil
		}
		res.answer = strings.TrimSpace(string(out))
		return true, nil
	})
	if err != nil {
		return r, res, fmt.Errorf("%s is not routed through every load-balancer host (next hops %v, want %v) or does not answer from the client host (router logs in %s): %w", res.vip, hops, want, r.Log("bgpd"), err)
	}
	// BFD sessions start once the BGP sessions are up, at one packet a
	// second until Up: the summary waits for them.
	progress("waiting for the router's BFD sessions with %s", strings.Join(res.hosts, ", "))
	var bfd map[netip.Addr]frr.BFDPeer
	err = wait.PollUntilContextTimeout(ctx, 300*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if bfd, err = r.BFDPeers(ctx); err != nil {
			return false, nil
		}
		for _, a := range want {
			if bfd[a].Status != "up" {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return r, res, fmt.Errorf("the router's BFD sessions with the load-balancer hosts are not up (%+v; logs in %s): %w", bfd, r.Log("bfdd"), err)
	}
	res.routeCmd = r.ShellCommand("show ip route " + route.String())
	res.bfdCmd = r.ShellCommand("show bfd peers brief")
	out, err := r.VTY(ctx, "show ip route "+route.String())
	if err != nil {
		return r, res, err
	}
	res.route = string(out)
	return r, res, nil
}

// applyBGPService writes default/hello-bgp to path and applies it with
// kubectl: the example's Pods behind an address of pool "bgp", with
// externalTrafficPolicy Local as the example's own Service, so that the
// Pods see the client's own address.
func applyBGPService(ctx context.Context, c *realcluster.Cluster, path string) error {
	svc := realcluster.LoadBalancerService("default", "hello-bgp")
	svc.Spec.Selector = map[string]string{"app": "hello"}
	svc.Annotations = map[string]string{annotation.Pool: "bgp"}
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	manifest, err := realcluster.Manifest(svc)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, []byte(manifest), 0o644); err != nil {
		return err
	}
	out, err := c.CP.Kubectl(ctx, "apply", "-f", path)
	if err != nil {
		return fmt.Errorf("kubectl apply -f %s: %w", path, err)
	}
	progress("%s", strings.TrimSpace(string(out)))
	return nil
}

// bgpSummary is the part of the summary about the BGP example.
func bgpSummary(res bgpResult) string {
	return fmt.Sprintf(`
  Service default/hello-bgp (%[1]s), in front of the same Pods, has the
  address %[2]s of pool "bgp", announced over BGP: the load-balancer hosts
  (%[3]s) advertise it to a router, FRR in the sandbox's host "frr".
  Its route there has a next hop per host (ECMP), and the router hashes
  each new connection to one of them by its ports:

    %[4]s

%[5]s
  This shell has no route to pool "bgp"; from the client host behind the
  router:

    %[6]s

  answers: %[7]s

  The IPv4 sessions run BFD (bfd = true, 100 ms, times 3): a host that
  dies or loses its link is dropped from the route after 300 ms, not
  after the 3 s hold time. The router's BFD sessions with the hosts:

    %[9]s

  The router's logs: %[8]s/ (zebra.log, bfdd.log, bgpd.log)
`, res.manifest, res.vip, strings.Join(res.hosts, ", "), res.routeCmd, indent(res.route), res.curl, res.answer, res.logs, res.bfdCmd)
}

func indent(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString("    " + l + "\n")
	}
	return b.String()
}

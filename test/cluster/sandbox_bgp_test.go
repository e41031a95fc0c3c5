package clustertest

import (
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/groundcloud/groundcloud/internal/annotation"
	"github.com/groundcloud/groundcloud/test/framework/frr"
	"github.com/groundcloud/groundcloud/test/images/echo"
)

// What checkSandboxBGP reads in the summary of `up --bgp`.
var (
	vtyshLineRE = regexp.MustCompile(`^\s+(ip netns exec (\S+) vtysh --vty_socket (\S+) -c '(show ip route (\S+))')$`)
	bfdLineRE   = regexp.MustCompile(`^\s+(ip netns exec \S+ vtysh --vty_socket \S+ -c 'show bfd peers brief')$`)
	curlBGPRE   = regexp.MustCompile(`^\s+(ip netns exec (\S+) curl http://\S+)$`)
	answersRE   = regexp.MustCompile(`^\s+answers: (.*)$`)
	kubeconfRE  = regexp.MustCompile(`^\s+export KUBECONFIG=(\S+)$`)
	kubectlRE   = regexp.MustCompile(`^\s+alias kubectl=(\S+)$`)
)

// checkSandboxBGP checks what the summary of `up --bgp` says of the BGP
// example, with the commands it prints, as a user types them:
//   - the vtysh command works and shows the router's route to the
//     address; the route, as printed and as the router has it in its
//     kernel, has a next hop per load-balancer host (ECMP);
//   - the BFD command works and shows a session up with every
//     load-balancer host;
//   - the curl command, from the client behind the router, is answered by
//     the example's Pods on both workers, which see the client's own
//     address (passthrough forwarding, externalTrafficPolicy Local), as
//     the printed answer does.
//
// It returns the router's directory, which Ctrl-C must remove.
func checkSandboxBGP(t *testing.T, summary []string) string {
	t.Helper()
	ctx := t.Context()
	vty := summaryMatch(t, summary, vtyshLineRE)
	routerNetns, socket, show := vty[2], vty[3], vty[4]
	prefix, err := netip.ParsePrefix(vty[5])
	if err != nil {
		t.Fatalf("route of %q: %v", vty[1], err)
	}
	lbs := lbHostAddrs(t, summary)
	if len(lbs) < 2 {
		t.Fatalf("load-balancer hosts %v: want at least 2 for --bgp", lbs)
	}

	printed := strings.Join(summary, "\n")
	for _, a := range lbs {
		if !strings.Contains(printed, "* "+a.String()+", via") {
			t.Errorf("the printed route to %s has no next hop %s:\n%s", prefix, a, printed)
		}
	}
	out, err := exec.CommandContext(ctx, "sh", "-c", vty[1]).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Routing entry for "+prefix.String()) {
		t.Errorf("%s: %v\n%s", vty[1], err, out)
	}
	out, err = exec.CommandContext(ctx, "ip", "netns", "exec", routerNetns, frr.VTYSH, "--vty_socket", socket, "-c", show+" json").CombinedOutput()
	if err != nil {
		t.Fatalf("vtysh %s json: %v\n%s", show, err, out)
	}
	if hops, err := frr.ParseNexthops(out, prefix); err != nil || !slices.Equal(hops, lbs) {
		t.Errorf("the router's route to %s goes to %v (%v), want every load-balancer host %v", prefix, hops, err, lbs)
	}

	bfdCmd := summaryMatch(t, summary, bfdLineRE)[1]
	out, err = exec.CommandContext(ctx, "sh", "-c", bfdCmd).CombinedOutput()
	if err != nil {
		t.Errorf("%s: %v\n%s", bfdCmd, err, out)
	}
	for _, a := range lbs {
		// "<id> <local> <peer> up"
		if !regexp.MustCompile(`(?m)\s` + regexp.QuoteMeta(a.String()) + `\s+up\s*$`).Match(out) {
			t.Errorf("%s shows no session up with %s:\n%s", bfdCmd, a, out)
		}
	}

	curl := summaryMatch(t, summary, curlBGPRE)
	client := clientAddr(t, curl[2])
	checkAnswer := func(answer string) (node string) {
		said, err := echo.Parse(answer)
		if err != nil || !strings.HasPrefix(said.Pod, "hello-") {
			t.Errorf("%s: %q is not an answer of the example's Pods (%v)", curl[1], answer, err)
			return ""
		}
		if said.Client.Addr() != client {
			t.Errorf("%s: the Pod saw %s, want the client's own address %s", curl[1], said.Client, client)
		}
		return said.Node
	}
	answers := 0
	for i, l := range summary {
		if i > 0 && answersRE.MatchString(l) && slices.ContainsFunc(summary[:i], curlBGPRE.MatchString) {
			checkAnswer(answersRE.FindStringSubmatch(l)[1])
			answers++
		}
	}
	if answers != 1 {
		t.Errorf("%d answers printed after %q, want 1", answers, curl[1])
	}
	// Until both workers answered (see checkSandboxL2).
	nodes := map[string]bool{}
	deadline := time.Now().Add(time.Minute)
	for i := 0; i < 20 || (len(nodes) < 2 && time.Now().Before(deadline)); i++ {
		out, err := exec.CommandContext(ctx, "sh", "-c", curl[1]).Output()
		if err != nil {
			t.Fatalf("%s: %v", curl[1], err)
		}
		node := checkAnswer(string(out))
		if node == "" {
			break
		}
		nodes[node] = true
	}
	if len(nodes) != 2 {
		t.Errorf("%s reached Pods on %v, want Pods on both workers", curl[1], nodes)
	}
	return socket
}

// lbHostAddrs are the IPv4 addresses of the Nodes labelled as
// load-balancer hosts, sorted, as the printed kubectl reports them.
func lbHostAddrs(t *testing.T, summary []string) []netip.Addr {
	t.Helper()
	kubectl := exec.CommandContext(t.Context(), summaryMatch(t, summary, kubectlRE)[1], "get", "nodes", "-l", annotation.LoadBalancerHostLabel+"=true",
		"-o", `jsonpath={range .items[*]}{range .status.addresses[?(@.type=="InternalIP")]}{.address}{"\n"}{end}{end}`)
	kubectl.Env = append(os.Environ(), "KUBECONFIG="+summaryMatch(t, summary, kubeconfRE)[1])
	out, err := kubectl.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get nodes: %v\n%s", err, out)
	}
	var addrs []netip.Addr
	for _, f := range strings.Fields(string(out)) {
		if a, err := netip.ParseAddr(f); err == nil && a.Is4() {
			addrs = append(addrs, a)
		}
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	return addrs
}

// clientAddr is the IPv4 address of the sandbox's host in namespace
// netns.
func clientAddr(t *testing.T, netns string) netip.Addr {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "ip", "-n", netns, "-4", "-o", "addr", "show", "scope", "global").Output()
	if err != nil {
		t.Fatalf("addresses of %s: %v", netns, err)
	}
	f := strings.Fields(string(out))
	if i := slices.Index(f, "inet"); i >= 0 && i+1 < len(f) {
		if p, err := netip.ParsePrefix(f[i+1]); err == nil {
			return p.Addr()
		}
	}
	t.Fatalf("no IPv4 address in %s: %s", netns, out)
	return netip.Addr{}
}

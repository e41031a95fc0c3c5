package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netns"
	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/backends"
	"github.com/groundcloud/groundcloud/internal/cloudroutes"
	"github.com/groundcloud/groundcloud/internal/config"
	"github.com/groundcloud/groundcloud/internal/crdinstall"
	"github.com/groundcloud/groundcloud/internal/routeapi"
	"github.com/groundcloud/groundcloud/internal/router"
	"github.com/groundcloud/groundcloud/test/framework/apionly"
	"github.com/groundcloud/groundcloud/test/framework/controlplane"
	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

var routerBinary = func() string { return filepath.Join(filepath.Dir(ccmBinary), "groundcloud-router") }

const (
	clusterCIDR = "10.244.0.0/16,fd00:10:244::/56"
	podPort     = 8080
)

// The network behind the gateway, where the remote client is.
var (
	remoteNet4 = netip.MustParsePrefix("203.0.113.0/24")
	remoteNet6 = netip.MustParsePrefix("2001:db8:ff::/64")
)

// TestPodRoutes: three nodes in network namespaces, each with a pod
// behind a veth in a pod range of its own; the controller manager with
// [Routes] and --cluster-cidr; groundcloud-router on each node and on a
// gateway with a remote client behind it. Once the test sets the nodes'
// pod CIDRs as node-ipam would, a pod on node 1 reaches pods on node 3 by
// their pod addresses and the server sees the client's pod address (no
// NAT), IPv4 and IPv6; the remote client reaches pods through the gateway;
// upstream sets NetworkUnavailable=False/RouteCreated. Then node 1's router
// is killed; while it is down one of its routes is deleted by hand, a stale
// route of ours and a foreign route are added, and node 3 is deleted. The
// other routers drop node 3's routes at once; node 1's, restarted, re-adds
// the missing route, drops the stale ones and keeps the foreign one: each
// route exactly once. Nothing of ours is in the root namespace.
func TestPodRoutes(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: runs etcd, kube-apiserver, our binaries and network namespaces")
	}
	began := time.Now()
	expectNoRoutesInRoot(t)
	t.Cleanup(func() { expectNoRoutesInRoot(t) })
	ctx := t.Context()
	env := startRoutesEnv(t)
	nodes, gw := env.Nodes, env.Clients["gateway"]

	pods := make([]*pod, len(nodes))
	for i, n := range nodes {
		pods[i] = addPod(t, env.Lab, n, i+1)
	}
	remote := addRemote(t, env.Lab, gw, nodes)
	for _, n := range nodes {
		env.startRouter(t, n, "--placement=node", "--node-name="+n.Name)
	}
	env.startRouter(t, gw, "--placement=gateway")
	setup := time.Now()

	// node-ipam's work: each node gets an IPv4 and an IPv6 pod CIDR.
	for i, n := range nodes {
		patch := fmt.Sprintf(`{"spec":{"podCIDR":%q,"podCIDRs":[%q,%q]}}`, pods[i].cidr4, pods[i].cidr4, pods[i].cidr6)
		if _, err := env.Client.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes {
		waitNode(t, env.Client, n.Name, "NetworkUnavailable=False/RouteCreated", func(n *v1.Node) bool {
			for _, c := range n.Status.Conditions {
				if c.Type == v1.NodeNetworkUnavailable {
					return c.Status == v1.ConditionFalse && c.Reason == "RouteCreated"
				}
			}
			return false
		})
	}
	for _, h := range append(slices.Clone(nodes), gw) {
		env.waitKernelRoutes(t, h, env.expectedRoutes(h, pods))
	}
	env.waitStatus(t, append(slices.Clone(nodes), gw))
	for _, n := range nodes {
		waitPodRoutes(t, env.Client, n.Name, v1.ConditionTrue, "4 routes") // two nodes, two families
	}
	t.Logf("routes programmed everywhere %s after the pod CIDRs were set", time.Since(setup).Round(time.Millisecond))

	// Pod to pod, directly: the server sees the client pod's address.
	for _, dst := range []netip.Addr{pods[2].addr4, pods[2].addr6} {
		expectPeer(t, pods[0].netns, dst, "pod-3", pods[0].addrOf(dst))
	}
	// Through the gateway from the network behind it.
	expectPeer(t, remote.netns, pods[2].addr4, "pod-3", remote.addr4)
	expectPeer(t, remote.netns, pods[1].addr6, "pod-2", remote.addr6)

	// Node 1's router dies; things change while it is down.
	r1 := env.routers[nodes[0].Name]
	if err := syscall.Kill(-r1.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-r1.Done()
	ip(t, nodes[0].Netns, "route", "del", pods[1].cidr4.String())                                             // lost by hand
	ip(t, nodes[0].Netns, "route", "add", "10.244.77.0/24", "via", nodes[1].Addr4.String(), "proto", "103")   // stale, ours
	ip(t, nodes[0].Netns, "route", "add", "198.18.0.0/24", "via", nodes[1].Addr4.String(), "proto", "static") // someone else's
	foreign := kernelRoutes(t, nodes[0], "static")
	if err := env.Client.CoreV1().Nodes().Delete(ctx, nodes[2].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	env.waitRouteObjects(t, 4)
	for _, h := range []*netlab.Host{nodes[1], gw} {
		env.waitKernelRoutes(t, h, env.expectedRoutes(h, pods[:2]))
	}
	t.Logf("node 3's routes removed everywhere %s after the Node was deleted", time.Since(deleted).Round(time.Millisecond))

	restarted := env.startRouter(t, nodes[0], "--placement=node", "--node-name="+nodes[0].Name)
	want := env.expectedRoutes(nodes[0], pods[:2])
	env.waitKernelRoutes(t, nodes[0], want)
	if diff := cmp.Diff(foreign, kernelRoutes(t, nodes[0], "static")); diff != "" {
		t.Errorf("routes of another protocol on node-1 changed (-before +after):\n%s", diff)
	}
	// Re-asserted, not duplicated: the restarted router added exactly the
	// route deleted by hand and deleted exactly the stale ones.
	out := restarted.Output()
	if got := strings.Count(out, `"Adding route"`); got != 1 || !strings.Contains(out, `destination="`+pods[1].cidr4.String()+`"`) {
		t.Errorf("restarted router added %d routes, want 1 (%s):\n%s", got, pods[1].cidr4, out)
	}
	if got := strings.Count(out, `"Deleting route"`); got != 3 {
		t.Errorf("restarted router deleted %d routes, want 3 (node-3's two and the stale one):\n%s", got, out)
	}
	for _, dst := range []netip.Addr{pods[1].addr4, pods[1].addr6} {
		expectPeer(t, pods[0].netns, dst, "pod-2", pods[0].addrOf(dst))
	}

	// A route node 1's router cannot program (someone else's to the same
	// destination): its Node says so, and says so no more once that route
	// is gone. The agents keep such a Node out of the load balancers.
	stopRouter := func() {
		p := env.routers[nodes[0].Name]
		if err := syscall.Kill(-p.Pid(), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-p.Done()
	}
	stopRouter()
	blocked := pods[1].cidr6.String()
	ip(t, nodes[0].Netns, "-6", "route", "del", blocked)
	ip(t, nodes[0].Netns, "-6", "route", "add", "blackhole", blocked, "proto", "static")
	env.startRouter(t, nodes[0], "--placement=node", "--node-name="+nodes[0].Name)
	waitPodRoutes(t, env.Client, nodes[0].Name, v1.ConditionFalse, "1 of 2 routes to other nodes' pods not programmed: "+blocked)
	stopRouter()
	ip(t, nodes[0].Netns, "-6", "route", "del", "blackhole", blocked, "proto", "static")
	env.startRouter(t, nodes[0], "--placement=node", "--node-name="+nodes[0].Name)
	waitPodRoutes(t, env.Client, nodes[0].Name, v1.ConditionTrue, "2 routes")
	expectPeer(t, pods[0].netns, pods[1].addr6, "pod-2", pods[0].addrOf(pods[1].addr6))

	// Node 1's link goes down and comes back: the kernel drops every route
	// over it and puts back only its own. The router watches the kernel's
	// routes and puts ours back; its full check is ten minutes away, so
	// nothing else could within the wait.
	stopRouter()
	env.startRouter(t, nodes[0], "--placement=node", "--node-name="+nodes[0].Name, "--max-sync-interval=10m")
	env.waitKernelRoutes(t, nodes[0], want)
	if err := nodes[0].SetLink(false); err != nil {
		t.Fatal(err)
	}
	eventually(t, "node-1's routes gone with its link", func() bool { return len(kernelRoutes(t, nodes[0], fmt.Sprint(router.DefaultProtocol))) == 0 })
	waitPodRoutes(t, env.Client, nodes[0].Name, v1.ConditionFalse, "not programmed")
	if err := nodes[0].SetLink(true); err != nil {
		t.Fatal(err)
	}
	up := time.Now()
	env.waitKernelRoutes(t, nodes[0], want)
	t.Logf("node-1's routes back %s after its link came up", time.Since(up).Round(time.Millisecond))
	waitPodRoutes(t, env.Client, nodes[0].Name, v1.ConditionTrue, "2 routes")
	for _, dst := range []netip.Addr{pods[1].addr4, pods[1].addr6} {
		expectPeer(t, pods[0].netns, dst, "pod-2", pods[0].addrOf(dst))
	}
	t.Logf("TestPodRoutes took %s", time.Since(began).Round(time.Millisecond))
}

// waitPodRoutes waits until the Node's groundcloud.io/PodRoutes condition,
// which its router writes, has status and a message containing msg.
func waitPodRoutes(t *testing.T, c kubernetes.Interface, node string, status v1.ConditionStatus, msg string) {
	t.Helper()
	waitNode(t, c, node, fmt.Sprintf("%s=%s (%q)", backends.ConditionPodRoutes, status, msg), func(n *v1.Node) bool {
		for _, cond := range n.Status.Conditions {
			if cond.Type == backends.ConditionPodRoutes {
				return cond.Status == status && strings.Contains(cond.Message, msg)
			}
		}
		return false
	})
}

// routesEnv is the sandbox plus routers.
type routesEnv struct {
	*apionly.Env
	dyn        dynamic.Interface
	kubeconfig string
	apiserver  string // host:port of the apiserver, forwarded into hosts
	forwarded  map[string]bool
	routers    map[string]*netlab.Process
	runs       map[string]int
}

func startRoutesEnv(t *testing.T) *routesEnv {
	t.Helper()
	tools, err := controlplane.ToolsDir(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	e, err := apionly.Start(t.Context(), apionly.Options{
		Topology:         netlab.Topology{LBHosts: 1, Clients: []string{"gateway"}},
		Dir:              t.TempDir(),
		ToolsDir:         tools,
		Binaries:         apionly.Binaries{ControllerManager: ccmBinary, Agent: agentBinary, NodeSim: nodesimBinary},
		Nodes:            3,
		ExtraCloudConfig: "[Routes]\n",
		ExtraCCMArgs:     []string{"--cluster-cidr=" + clusterCIDR, "--configure-cloud-routes=true", "--route-reconciliation-period=1s"},
		Logf:             t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	env := &routesEnv{Env: e, forwarded: map[string]bool{}, routers: map[string]*netlab.Process{}, runs: map[string]int{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last lines of the controller manager:\n%s", controlplane.LogTail(e.CCMLog(), 40))
			for name, p := range env.routers {
				t.Logf("last lines of the router on %s:\n%s", name, controlplane.LogTail(p.LogPath, 30))
			}
		}
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	if env.dyn, err = dynamic.NewForConfig(e.CP.RESTConfig()); err != nil {
		t.Fatal(err)
	}
	// The routers run as a ServiceAccount with only the rules docs/routes.md
	// gives them.
	grant(t, e.CP, "groundcloud-router", rbacv1.Subject{Kind: "ServiceAccount", Name: "groundcloud-router", Namespace: "kube-system"}, routerRules)
	if env.kubeconfig, err = e.CP.ServiceAccountKubeconfig(t.Context(), "kube-system", "groundcloud-router"); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(e.CP.URL)
	if err != nil {
		t.Fatal(err)
	}
	env.apiserver = u.Host
	// Routers started before the controller manager installed the CRD
	// would wait out the informer's back-off.
	eventually(t, "the Route CRD", func() bool {
		_, err := routeapi.NewClient(env.dyn).List(t.Context())
		return err == nil
	})
	return env
}

// startRouter starts groundcloud-router in h, forwarding the apiserver
// into h the first time.
func (env *routesEnv) startRouter(t *testing.T, h *netlab.Host, args ...string) *netlab.Process {
	t.Helper()
	if !env.forwarded[h.Name] {
		f, err := h.ForwardLoopback(t.Context(), env.apiserver)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Close() })
		env.forwarded[h.Name] = true
	}
	env.runs[h.Name]++
	log := filepath.Join(env.Opts.Dir, fmt.Sprintf("router-%s.%d.log", h.Name, env.runs[h.Name]))
	args = append([]string{"--kubeconfig=" + env.kubeconfig, "--host-name=" + h.Name, "--v=2"}, args...)
	p, err := h.Start(t.Context(), log, routerBinary(), args...)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := p.WaitForOutput(wctx, "Router running"); err != nil {
		t.Fatal(err)
	}
	env.routers[h.Name] = p
	return p
}

// expectedRoutes are the routes h should hold for the given pods' nodes:
// all of them on the gateway, the other nodes' on a node.
func (env *routesEnv) expectedRoutes(h *netlab.Host, pods []*pod) []string {
	var v4, v6 []string
	for _, p := range pods {
		if p.node == h {
			continue
		}
		v4 = append(v4, fmt.Sprintf("%s via %s", p.cidr4, p.node.Addr4))
		v6 = append(v6, fmt.Sprintf("%s via %s", p.cidr6, p.node.Addr6))
	}
	return append(v4, v6...)
}

// waitKernelRoutes waits until h's routes of our protocol are exactly want.
func (env *routesEnv) waitKernelRoutes(t *testing.T, h *netlab.Host, want []string) {
	t.Helper()
	var got []string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("routes of %s last seen: %q, want %q", h.Name, got, want)
		}
	})
	eventually(t, "routes of "+h.Name, func() bool {
		got = kernelRoutes(t, h, fmt.Sprint(router.DefaultProtocol))
		return slices.Equal(got, want)
	})
}

func (env *routesEnv) routeObjects(t *testing.T) []*v1alpha1.Route {
	t.Helper()
	objs, err := routeapi.NewClient(env.dyn).List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func (env *routesEnv) waitRouteObjects(t *testing.T, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d Route objects", n), func() bool { return len(env.routeObjects(t)) == n })
}

// waitStatus waits until every Route says Programmed=True for every host
// that should hold it: the gateway and the nodes other than its own.
func (env *routesEnv) waitStatus(t *testing.T, hosts []*netlab.Host) {
	t.Helper()
	var missing []string
	eventually(t, "Programmed status of every Route", func() bool {
		missing = nil
		for _, r := range env.routeObjects(t) {
			for _, h := range hosts {
				if h.Name != r.Spec.NodeName && !programmedBy(r, h.Name) {
					missing = append(missing, r.Name+" by "+h.Name)
				}
			}
		}
		return len(missing) == 0
	})
}

func programmedBy(r *v1alpha1.Route, host string) bool {
	for _, h := range r.Status.Hosts {
		for _, c := range h.Conditions {
			if h.Name == host && c.Type == v1alpha1.ConditionProgrammed && c.Status == metav1.ConditionTrue && c.ObservedGeneration == r.Generation {
				return true
			}
		}
	}
	return false
}

// pod is a network namespace behind a veth of its node, with addresses
// from the node's pod CIDRs and a TCP server that answers with its name
// and the address of the peer it sees.
type pod struct {
	name         string
	node         *netlab.Host
	netns        string
	cidr4, cidr6 netip.Prefix
	addr4, addr6 netip.Addr
}

func (p *pod) addrOf(dst netip.Addr) netip.Addr {
	if dst.Is4() {
		return p.addr4
	}
	return p.addr6
}

// addPod makes pod i on node: 10.244.i.0/24 and fd00:10:244:i::/64, the
// first address on the node's end of the veth (the pod's gateway), the
// second in the pod.
func addPod(t *testing.T, l *netlab.Lab, node *netlab.Host, i int) *pod {
	t.Helper()
	p := &pod{
		name: fmt.Sprintf("pod-%d", i), node: node,
		netns: fmt.Sprintf("%s-pod%d", l.Prefix, i),
		cidr4: netip.MustParsePrefix(fmt.Sprintf("10.244.%d.0/24", i)),
		cidr6: netip.MustParsePrefix(fmt.Sprintf("fd00:10:244:%d::/64", i)),
	}
	p.addr4, p.addr6 = p.cidr4.Addr().Next().Next(), p.cidr6.Addr().Next().Next()
	gw4, gw6 := p.cidr4.Addr().Next(), p.cidr6.Addr().Next()
	addNamespace(t, p.netns)
	ip(t, node.Netns, "link", "add", "pod0", "type", "veth", "peer", "name", "eth0", "netns", p.netns)
	ip(t, node.Netns, "addr", "add", netip.PrefixFrom(gw4, 24).String(), "dev", "pod0")
	ip(t, node.Netns, "-6", "addr", "add", netip.PrefixFrom(gw6, 64).String(), "dev", "pod0", "nodad")
	ip(t, node.Netns, "link", "set", "pod0", "up")
	ip(t, p.netns, "addr", "add", netip.PrefixFrom(p.addr4, 24).String(), "dev", "eth0")
	ip(t, p.netns, "-6", "addr", "add", netip.PrefixFrom(p.addr6, 64).String(), "dev", "eth0", "nodad")
	ip(t, p.netns, "link", "set", "eth0", "up")
	ip(t, p.netns, "route", "add", "default", "via", gw4.String())
	ip(t, p.netns, "-6", "route", "add", "default", "via", gw6.String())
	setForwarding(t, node)
	serveWho(t, p.netns, p.name)
	return p
}

// remote is a client on a network of its own behind the gateway.
type remote struct {
	netns        string
	addr4, addr6 netip.Addr
}

// addRemote joins a client namespace to the gateway by a veth; the nodes
// reach its network through the gateway (their default route, in a real
// network).
func addRemote(t *testing.T, l *netlab.Lab, gw *netlab.Host, nodes []*netlab.Host) *remote {
	t.Helper()
	r := &remote{netns: l.Prefix + "-remote", addr4: remoteNet4.Addr().Next().Next(), addr6: remoteNet6.Addr().Next().Next()}
	gw4, gw6 := remoteNet4.Addr().Next(), remoteNet6.Addr().Next()
	addNamespace(t, r.netns)
	ip(t, gw.Netns, "link", "add", "south", "type", "veth", "peer", "name", "eth0", "netns", r.netns)
	ip(t, gw.Netns, "addr", "add", netip.PrefixFrom(gw4, 24).String(), "dev", "south")
	ip(t, gw.Netns, "-6", "addr", "add", netip.PrefixFrom(gw6, 64).String(), "dev", "south", "nodad")
	ip(t, gw.Netns, "link", "set", "south", "up")
	ip(t, r.netns, "addr", "add", netip.PrefixFrom(r.addr4, 24).String(), "dev", "eth0")
	ip(t, r.netns, "-6", "addr", "add", netip.PrefixFrom(r.addr6, 64).String(), "dev", "eth0", "nodad")
	ip(t, r.netns, "link", "set", "eth0", "up")
	ip(t, r.netns, "route", "add", "default", "via", gw4.String())
	ip(t, r.netns, "-6", "route", "add", "default", "via", gw6.String())
	setForwarding(t, gw)
	for _, n := range nodes {
		ip(t, n.Netns, "route", "add", remoteNet4.String(), "via", gw.Addr4.String(), "proto", "static")
		ip(t, n.Netns, "-6", "route", "add", remoteNet6.String(), "via", gw.Addr6.String(), "proto", "static")
	}
	return r
}

// addNamespace creates a namespace named like the lab's (so that
// netlab.SweepStale removes it after a crash) and removes it at cleanup.
func addNamespace(t *testing.T, name string) {
	t.Helper()
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	// Addresses are usable at once: no duplicate address detection.
	for _, key := range []string{"all", "default"} {
		sh := fmt.Sprintf("echo 0 > /proc/sys/net/ipv6/conf/%s/accept_dad", key)
		if out, err := exec.Command("ip", "netns", "exec", name, "sh", "-c", sh).CombinedOutput(); err != nil {
			t.Fatalf("%s in %s: %v: %s", sh, name, err, out)
		}
	}
	ip(t, name, "link", "set", "lo", "up")
}

func setForwarding(t *testing.T, h *netlab.Host) {
	t.Helper()
	for _, key := range []string{"net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding"} {
		if err := h.SetSysctl(key, "1"); err != nil {
			t.Fatal(err)
		}
	}
}

// ip runs `ip -n netns args...`: only ever inside a namespace of the test.
func ip(t *testing.T, netnsName string, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", append([]string{"-n", netnsName}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("ip -n %s %s: %v: %s", netnsName, strings.Join(args, " "), err, out)
	}
}

// kernelRoutes lists h's IPv4, then IPv6 routes of a protocol as
// "dst via gateway".
func kernelRoutes(t *testing.T, h *netlab.Host, proto string) []string {
	t.Helper()
	var out []string
	for _, family := range []string{"-4", "-6"} {
		b, err := exec.Command("ip", "-n", h.Netns, family, "route", "show", "proto", proto).CombinedOutput()
		if err != nil {
			t.Fatalf("ip route show in %s: %v: %s", h.Name, err, b)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if f := strings.Fields(line); len(f) >= 3 {
				out = append(out, strings.Join(f[:3], " "))
			}
		}
	}
	return out
}

// expectNoRoutesInRoot checks, reading only, that the root namespace holds
// no route of our protocol.
func expectNoRoutesInRoot(t *testing.T) {
	t.Helper()
	for _, family := range []string{"-4", "-6"} {
		out, err := exec.Command("ip", family, "route", "show", "table", "all", "proto", fmt.Sprint(router.DefaultProtocol)).CombinedOutput()
		if err != nil {
			t.Fatalf("ip route show: %v: %s", err, out)
		}
		if s := strings.TrimSpace(string(out)); s != "" {
			t.Errorf("the root namespace has routes of protocol %d:\n%s", router.DefaultProtocol, s)
		}
	}
}

// inNetns runs fn on a thread switched into a named namespace. Sockets fn
// creates stay there.
func inNetns(name string, fn func() error) error {
	target, err := netns.GetFromName(name)
	if err != nil {
		return err
	}
	defer target.Close()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		if err := netns.Set(target); err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		err = fn()
		if rerr := netns.Set(orig); rerr != nil {
			errc <- errors.Join(err, rerr) // stay locked: the thread dies with the goroutine
			return
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	return <-errc
}

// serveWho answers each TCP connection on podPort in the namespace with
// "<name> <peer address>".
func serveWho(t *testing.T, netnsName, name string) {
	t.Helper()
	var ln net.Listener
	if err := inNetns(netnsName, func() (err error) {
		ln, err = net.Listen("tcp", fmt.Sprintf(":%d", podPort))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			peer, _ := netip.ParseAddrPort(c.RemoteAddr().String())
			fmt.Fprintf(c, "%s %s\n", name, peer.Addr().Unmap())
			_ = c.Close()
		}
	}()
}

// expectPeer connects from a namespace to dst and checks who answered and
// which source address it saw.
func expectPeer(t *testing.T, from string, dst netip.Addr, wantServer string, wantPeer netip.Addr) {
	t.Helper()
	var line string
	var err error
	for range 20 { // a first packet may wait for neighbour resolution
		if line, err = whoFrom(t.Context(), from, netip.AddrPortFrom(dst, podPort)); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("connect from %s to %s: %v", from, dst, err)
	}
	if want := fmt.Sprintf("%s %s", wantServer, wantPeer); line != want {
		t.Errorf("from %s to %s: answer %q, want %q", from, dst, line, want)
	} else {
		t.Logf("from %s to %s: %s", from, dst, line)
	}
}

func whoFrom(ctx context.Context, from string, dst netip.AddrPort) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var c net.Conn
	if err := inNetns(from, func() (err error) {
		c, err = new(net.Dialer).DialContext(ctx, "tcp", dst.String())
		return err
	}); err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

// TestRouteCRD installs the CRDs as the controller manager does and checks
// the Route schema's rules, the printer columns, and that the RBAC rules
// docs/routes.md gives each component are enough and no more: the router
// writes only status, the controller manager manages specs.
func TestRouteCRD(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: runs etcd and kube-apiserver")
	}
	ctx := t.Context()
	cp := controlplane.StartT(t, controlplane.Options{})
	admin, err := dynamic.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := crdinstall.All(ctx, admin, "test"); err != nil {
		t.Fatal(err)
	}
	good := func() map[string]any {
		return map[string]any{"nodeName": "node-1", "destinationCIDR": "fd00:10:244:1::/64", "nextHop": "2001:db8::11",
			"nodeAddresses": []any{map[string]any{"type": "InternalIP", "address": "2001:db8::11"}}}
	}
	for i, tc := range []struct {
		name    string
		mutate  func(map[string]any)
		wantErr string
	}{
		{name: "well-formed"},
		{name: "not canonical", mutate: func(s map[string]any) { s["destinationCIDR"] = "fd00:10:244:1:0::/64" }, wantErr: "canonical form"},
		{name: "host bits", mutate: func(s map[string]any) { s["destinationCIDR"] = "10.244.1.1/24"; s["nextHop"] = "192.0.2.11" }, wantErr: "without host bits"},
		{name: "not a CIDR", mutate: func(s map[string]any) { s["destinationCIDR"] = "10.244.1.0" }, wantErr: "canonical form"},
		{name: "next hop of the other family", mutate: func(s map[string]any) { s["nextHop"] = "192.0.2.11" }, wantErr: "of the destinationCIDR's family"},
		{name: "next hop not an address", mutate: func(s map[string]any) { s["nextHop"] = "node-1" }, wantErr: "must be an IPv4 or IPv6 address"},
		{name: "no node", mutate: func(s map[string]any) { s["nodeName"] = "" }, wantErr: "spec.nodeName"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := good()
			if tc.mutate != nil {
				tc.mutate(spec)
			}
			obj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "groundcloud.io/v1alpha1", "kind": "Route",
				"metadata": map[string]any{"name": fmt.Sprintf("r-%d", i)}, "spec": spec,
			}}
			_, err := admin.Resource(routeapi.Resource).Create(ctx, obj, metav1.CreateOptions{})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("well-formed object rejected: %v", err)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("malformed object accepted")
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("rejected with %v, want a message containing %q", err, tc.wantErr)
			}
		})
	}
	// The node and destination are immutable; the next hop is not.
	_, err = admin.Resource(routeapi.Resource).Patch(ctx, "r-0", types.MergePatchType, []byte(`{"spec":{"destinationCIDR":"fd00:10:244:2::/64"}}`), metav1.PatchOptions{})
	if err == nil || !strings.Contains(err.Error(), "destinationCIDR is immutable") {
		t.Errorf("changing the destination: %v", err)
	}
	if _, err = admin.Resource(routeapi.Resource).Patch(ctx, "r-0", types.MergePatchType, []byte(`{"spec":{"nextHop":"2001:db8::99"}}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("changing the next hop: %v", err)
	}
	out, err := cp.Kubectl(ctx, "get", "routes")
	if err != nil {
		t.Fatalf("kubectl: %v\n%s", err, out)
	}
	for _, col := range []string{"NODE", "DESTINATION", "NEXT-HOP", "AGE", "node-1", "fd00:10:244:1::/64", "2001:db8::99"} {
		if !strings.Contains(string(out), col) {
			t.Errorf("kubectl get routes lacks %q:\n%s", col, out)
		}
	}

	// RBAC: each component as a user with only its rules.
	router := impersonate(t, cp, "router", routerRules)
	ccm := impersonate(t, cp, "ccm", controllerManagerRules)
	m := cloudroutes.NewManager(ccm, func() *config.Config { return &config.Config{} })
	route := &cloudprovider.Route{TargetNode: "node-2", DestinationCIDR: "10.244.2.0/24",
		TargetNodeAddresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.12"}}}
	if err := m.Create(ctx, route); err != nil {
		t.Errorf("controller manager: create: %v", err)
	}
	route.TargetNodeAddresses[0].Address = "192.0.2.22"
	if err := m.Create(ctx, route); err != nil { // an update
		t.Errorf("controller manager: update: %v", err)
	}
	if _, err := m.List(ctx); err != nil {
		t.Errorf("controller manager: list: %v", err)
	}
	rc := routeapi.NewClient(router)
	if _, err := rc.List(ctx); err != nil {
		t.Errorf("router: list: %v", err)
	}
	if _, err := router.Resource(routeapi.Resource).Watch(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("router: watch: %v", err)
	}
	st := v1alpha1.RouteHostStatus{Name: "gw", Conditions: []metav1.Condition{{Type: "Programmed", Status: "True", Reason: "Programmed", LastTransitionTime: metav1.Now()}}}
	if err := rc.ApplyHostStatus(ctx, "node-2.10-244-2-0-24", "groundcloud-router/gw", st); err != nil {
		t.Errorf("router: apply status: %v", err)
	}
	if err := rc.Delete(ctx, "", "node-2.10-244-2-0-24", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("router: delete = %v, want Forbidden", err)
	}
	_, err = router.Resource(routeapi.Resource).Patch(ctx, "node-2.10-244-2-0-24", types.MergePatchType, []byte(`{"spec":{"nextHop":"192.0.2.99"}}`), metav1.PatchOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("router: patch spec = %v, want Forbidden", err)
	}
	if err := m.Delete(ctx, &cloudprovider.Route{Name: "node-2.10-244-2-0-24"}); err != nil {
		t.Errorf("controller manager: delete: %v", err)
	}
}

// The RBAC rules docs/routes.md gives each component for Routes.
var (
	routerRules = []rbacv1.PolicyRule{
		{APIGroups: []string{"groundcloud.io"}, Resources: []string{"routes"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"groundcloud.io"}, Resources: []string{"routes/status"}, Verbs: []string{"patch"}},
		{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"patch"}},
	}
	controllerManagerRules = []rbacv1.PolicyRule{
		{APIGroups: []string{"groundcloud.io"}, Resources: []string{"routes"}, Verbs: []string{"get", "list", "create", "update", "delete"}},
	}
)

// impersonate returns a client acting as a user bound to a ClusterRole of
// the given rules only.
func impersonate(t *testing.T, cp *controlplane.ControlPlane, user string, rules []rbacv1.PolicyRule) dynamic.Interface {
	t.Helper()
	grant(t, cp, "test-"+user, rbacv1.Subject{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}, rules)
	cfg := cp.RESTConfig()
	cfg.Impersonate.UserName = user
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dyn
}

// TestRoutesControllerManagerFlags: without [Routes] the controller manager
// runs without --cluster-cidr (the route controller does not start); with
// [Routes] it needs --cluster-cidr and exits at start without it.
func TestRoutesControllerManagerFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: runs etcd, kube-apiserver and the controller manager")
	}
	cp := controlplane.StartT(t, controlplane.Options{})
	kubeconfig, err := cp.Kubeconfig("groundcloud-controller-manager")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	run := func(name, cloudConfig string) *apionly.Process {
		path := filepath.Join(dir, name+".conf")
		writeFile(t, path, cloudConfig)
		return startProcess(t, filepath.Join(dir, name+".log"), ccmBinary,
			"--kubeconfig="+kubeconfig, "--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig,
			"--cloud-config="+path, "--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0", "--v=2")
	}

	off := run("off", "[Global]\nregion = lab\n")
	waitLog(t, filepath.Join(dir, "off.log"), "cloud provider does not support routes. Will not configure cloud provider routes.")
	waitLog(t, filepath.Join(dir, "off.log"), `Started "cloud-node-controller"`)
	select {
	case <-off.Done():
		t.Fatalf("controller manager without [Routes] exited:\n%s", controlplane.LogTail(filepath.Join(dir, "off.log"), 20))
	case <-time.After(time.Second):
	}
	_ = off.Stop()

	on := run("on", "[Global]\nregion = lab\n[Routes]\n")
	select {
	case <-on.Done():
	case <-time.After(time.Minute):
		t.Fatal("controller manager with [Routes] and no --cluster-cidr did not exit")
	}
	// Upstream's message, or routes.CheckFlags's once the controller
	// manager checks its flags before starting.
	if log := controlplane.LogTail(filepath.Join(dir, "on.log"), 40); !strings.Contains(log, "invalid CIDR address") && !strings.Contains(log, "needs --cluster-cidr") {
		t.Errorf("controller manager with [Routes] and no --cluster-cidr exited without naming the flag:\n%s", log)
	}
}

// grant binds a ClusterRole of the given rules, both named name, to subject.
func grant(t *testing.T, cp *controlplane.ControlPlane, name string, subject rbacv1.Subject, rules []rbacv1.PolicyRule) {
	t.Helper()
	c := cp.Client()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	if _, err := c.RbacV1().ClusterRoles().Create(t.Context(), role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{subject},
	}
	if _, err := c.RbacV1().ClusterRoleBindings().Create(t.Context(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGranted(t, cp, subject, rules)
}

// waitGranted waits until the apiserver's authorizer allows subject the
// first verb of each rule: the RBAC authorizer reads roles and bindings
// from an informer, so a request made at once may still be forbidden.
func waitGranted(t *testing.T, cp *controlplane.ControlPlane, subject rbacv1.Subject, rules []rbacv1.PolicyRule) {
	t.Helper()
	spec := authorizationv1.SubjectAccessReviewSpec{User: subject.Name}
	switch subject.Kind {
	case rbacv1.GroupKind:
		spec = authorizationv1.SubjectAccessReviewSpec{User: "any", Groups: []string{subject.Name}}
	case rbacv1.ServiceAccountKind:
		spec.User = "system:serviceaccount:" + subject.Namespace + ":" + subject.Name
	}
	for _, r := range rules {
		if len(r.Verbs) == 0 || len(r.Resources) == 0 || len(r.APIGroups) == 0 {
			continue
		}
		spec.ResourceAttributes = &authorizationv1.ResourceAttributes{Verb: r.Verbs[0], Group: r.APIGroups[0], Resource: r.Resources[0]}
		err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			sar, err := cp.Client().AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
			return err == nil && sar.Status.Allowed, nil
		})
		if err != nil {
			t.Fatalf("%s %s is not allowed to %s %s within 30s of its grant", subject.Kind, subject.Name, r.Verbs[0], r.Resources[0])
		}
	}
}

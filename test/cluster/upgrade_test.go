package clustertest

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/annotation"
	"github.com/groundcloud/groundcloud/internal/lbapi"
	"github.com/groundcloud/groundcloud/test/framework/availability"
	"github.com/groundcloud/groundcloud/test/framework/controlplane"
	"github.com/groundcloud/groundcloud/test/framework/frr"
	"github.com/groundcloud/groundcloud/test/framework/netlab"
	"github.com/groundcloud/groundcloud/test/framework/realcluster"
)

// The upgrade and downgrade lane (docs/install.md "Upgrading"): the
// previous release (realcluster.PreviousRelease) installed from its own
// deploy/ or chart and images, Services of each kind with long-lived
// connections and a stream of new ones, an upgrade to this working tree by
// the documented steps, then a downgrade back.

// upgradeKinds are the Services the lane keeps traffic on: L2
// passthrough (the default), L2 proxy, and passthrough over BGP (every
// host advertises it to the router, FRR, behind which the client sits).
// hitless: no new connection may fail while the components roll (with two
// load-balancer hosts); where false, the failures are logged only, with the
// held connections broken. What is lost is the previous release's doing
// (docs/install.md "Upgrading"): upgrading, its agents stop, and one with
// no Ready successor (the other host's new agent in its hold-down) removes
// its address, then its rules: L2 proxy lost 0 to 51 new connections of
// 1,600 to 2,300 (gaps up to 1.0 s), and held L2 passthrough connections
// were reset by the Pods, which the host's kube-proxy sent them to as new
// flows. Downgrading, its agents start, Ready before their BGP session is
// up, and this version's agent on the other host withdraws its route: BGP
// passthrough lost 0 to 153.
var upgradeKinds = []struct {
	name    string
	mod     func(*corev1.Service)
	hitless bool
}{
	{"l2-passthrough", func(*corev1.Service) {}, true},
	{"l2-proxy", func(s *corev1.Service) { s.Annotations[annotation.Forwarding] = "proxy" }, false},
	{"bgp-passthrough", inPool("bgp"), false},
}

// upgradeCloudConfig adds pool "bgp" (TestBGP's ranges) and the router on
// host "frr" as a BGP peer of every host, with keys both releases know.
func upgradeCloudConfig(c *realcluster.Cluster) string {
	return fmt.Sprintf("[Pool \"bgp\"]\naddresses = %s\naddresses = %s\nannounce = bgp\nauto-assign = false\n\n", bgpRange4, bgpRange6) +
		realcluster.BGPPeers(c.Clients["frr"])
}

// TestUpgrade installs the previous release, upgrades it to the working tree as
// docs/install.md says (label the hosts with the new key, install the new
// version, remove the old label), then downgrades it back (the old key
// again, the old version, the new label removed), checking after each
// step: the agents on exactly the load-balancer hosts, running the
// release's image; the controller manager's image; each Service's
// addresses, status and LoadBalancer object unchanged and Ready; new
// connections answered after the rollout. The connections lost while the
// components roll (new ones, one every 20 ms, and four long-lived ones per
// Service, opened once before the upgrade) are logged; only a hitless kind
// (upgradeKinds) must lose no new connection. It does so twice, on a
// cluster each: as deploy/'s users do (kubectl apply -k, then the previous
// release's deploy/ to go back), and as the chart's do (helm upgrade, then
// helm rollback). See docs/install.md "Upgrading".
func TestUpgrade(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: runs a real cluster")
	}
	if os.Geteuid() != 0 {
		t.Skip("end-to-end test: needs root")
	}
	if err := frr.Available(); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	repo, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	// The lane needs the repository's history (the previous release).
	// make test-upgrade (GROUNDCLOUD_UPGRADE=1) insists on it; make test
	// skips the lane in a clone without it (a tarball, a shallow clone),
	// saying so.
	dir := t.TempDir()
	prevTree := filepath.Join(dir, "previous")
	skip, err := realcluster.PreviousReleaseTree(ctx, repo, prevTree, os.Getenv("GROUNDCLOUD_UPGRADE") != "")
	if err != nil {
		t.Fatal(err)
	}
	if skip != "" {
		t.Skipf("the upgrade lane %s, or make test-upgrade to fail instead", skip)
	}
	tools, err := controlplane.ToolsDir(ctx)
	if err != nil {
		t.Fatal(err)
	}
	current, err := realcluster.BuildRelease(ctx, repo, filepath.Join(dir, "current-images"))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("kubectl", func(t *testing.T) {
		c := startUpgradeCluster(t, tools, prevTree, false)
		l := newUpgradeLane(t, c)
		l.step(t, "upgrade (kubectl apply -k)", current, realcluster.PreviousHostLabel, c.Install)
		l.step(t, "downgrade (kubectl apply -k)", l.previous, annotation.LoadBalancerHostLabel, c.Install)
	})
	t.Run("helm", func(t *testing.T) {
		c := startUpgradeCluster(t, tools, prevTree, true)
		l := newUpgradeLane(t, c)
		l.step(t, "upgrade (helm upgrade)", current, realcluster.PreviousHostLabel, c.Install)
		l.step(t, "downgrade (helm rollback)", l.previous, annotation.LoadBalancerHostLabel, c.Rollback)
	})
}

// startUpgradeCluster starts a real cluster with the previous release
// (its tree at prevTree) installed, with kubectl apply -k or with helm:
// two dedicated load-balancer hosts (tainted with the key the old label
// had: the taint stays), two workers with the Pods, FRR as the router of
// the client.
func startUpgradeCluster(t *testing.T, tools, prevTree string, helm bool) *realcluster.Cluster {
	t.Helper()
	ctx := t.Context()
	c, err := realcluster.Start(ctx, realcluster.Options{
		Topology:       netlab.Topology{LBHosts: 2, Clients: []string{"client", "frr"}},
		Dir:            filepath.Join(t.TempDir(), "cluster"),
		ToolsDir:       tools,
		Repo:           prevTree,
		Helm:           helm,
		Logf:           t.Logf,
		CloudConfigFor: upgradeCloudConfig,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range c.Nodes {
				if n.LoadBalancer {
					logPodTails(t, n, 60, "groundcloud-agent")
				}
			}
		}
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	r, err := c.StartFRR(ctx, c.Clients["frr"])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop() })
	if err := realcluster.RouteThrough(ctx, c.Clients["client"], r.Host, bgpRoute4, bgpRoute6); err != nil {
		t.Fatal(err)
	}
	if got := c.HostLabel(); got != realcluster.PreviousHostLabel {
		t.Fatalf("release %s places its agents on %s, want %s: is realcluster.PreviousRelease the commit it says?", realcluster.PreviousRelease, got, realcluster.PreviousHostLabel)
	}
	return c
}

// upgradeLane is the Services the lane keeps traffic on, their addresses
// as first served, and a client per Service.
type upgradeLane struct {
	s *haScenario
	// previous is the release installed at the start.
	previous realcluster.Release
	addrs    map[string][]netip.Addr
	clients  map[string]*availability.Client
	// since is where the next step's measurement starts.
	since time.Time
	// stepped: a step ran (the next one opens new long-lived connections).
	stepped bool
}

// newUpgradeLane creates the Services on c, where the previous release
// runs, and checks it.
func newUpgradeLane(t *testing.T, c *realcluster.Cluster) *upgradeLane {
	dyn, err := dynamic.NewForConfig(c.CP.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	s := newHAScenario(t, c, dyn, "upgrade")
	previous := realcluster.Release{Repo: c.Opts.Repo, ControllerManager: c.Images.ControllerManager, Agent: c.Images.Agent, Router: c.Images.Router}
	l := &upgradeLane{s: s, previous: previous, addrs: map[string][]netip.Addr{}, clients: map[string]*availability.Client{}}
	for _, k := range upgradeKinds {
		l.addrs[k.name] = s.createService(t, k.name, 1, k.mod)
		vip := l.addrs[k.name][0]
		waitServing(t, lbClient(s.client), fmt.Sprintf("http://%s/", netip.AddrPortFrom(vip, 8080)))
		l.clients[k.name] = s.startClient(t, vip, availability.Options{})
	}
	l.since = time.Now()
	l.check(t, "previous release installed", previous)
	return l
}

// step installs r over what runs with install (which labels the hosts
// with r's key first), removes the label oldKey, then checks and reports
// the traffic.
func (l *upgradeLane) step(t *testing.T, name string, r realcluster.Release, oldKey string, install func(context.Context, realcluster.Release) error) {
	t.Helper()
	ctx := t.Context()
	if l.stepped {
		// Fresh long-lived connections, so that each step's are its own.
		for _, k := range upgradeKinds {
			l.clients[k.name].Stop()
			l.clients[k.name] = l.s.startClient(t, l.addrs[k.name][0], availability.Options{})
		}
		time.Sleep(2 * time.Second)
		l.since = time.Now()
	}
	l.stepped = true
	began := time.Now()
	if err := install(ctx, r); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	t.Logf("%s: %s rolled out in %v", name, r.Repo, time.Since(began).Round(time.Second))
	before := l.agentPods(t)
	if err := l.s.c.RemoveHostLabel(ctx, oldKey); err != nil {
		t.Fatal(err)
	}
	// The DaemonSet controller would delete the agents of hosts its
	// selector no longer matches at once; give it time to show it does
	// not, and the restarted agents their --ownership-hold-down.
	time.Sleep(agentHoldDown + 3*time.Second)
	if after := l.agentPods(t); !slices.Equal(before, after) {
		t.Errorf("%s: removing label %s changed the agents: %v, then %v", name, oldKey, before, after)
	}
	l.check(t, name, r)
	l.report(t, name, began)
}

// agentPods are the agent Pods' "node/uid", sorted.
func (l *upgradeLane) agentPods(t *testing.T) []string {
	t.Helper()
	pods, err := l.s.c.Client.CoreV1().Pods(metav1.NamespaceSystem).List(t.Context(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=groundcloud-agent"})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pods.Items {
		out = append(out, p.Spec.NodeName+"/"+string(p.UID))
	}
	slices.Sort(out)
	return out
}

// check checks what runs after a step: components and their images, the
// host labels, the Services and their LoadBalancer objects.
func (l *upgradeLane) check(t *testing.T, name string, r realcluster.Release) {
	t.Helper()
	t.Run(name+": agents on the load-balancer hosts only, controller manager, images", func(t *testing.T) {
		l.checkComponents(t, r)
	})
	t.Run(name+": Services keep their addresses; objects Ready", func(t *testing.T) {
		for _, k := range upgradeKinds {
			l.checkService(t, k.name)
		}
	})
}

func (l *upgradeLane) checkComponents(t *testing.T, r realcluster.Release) {
	c := l.s.c
	pods, err := c.Client.CoreV1().Pods(metav1.NamespaceSystem).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	agents := map[string]string{}
	var cms []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			t.Errorf("Pod %s on %s is terminating", p.Name, p.Spec.NodeName)
		}
		img := p.Spec.Containers[0].Image
		switch {
		case strings.HasPrefix(p.Name, "groundcloud-agent-"):
			agents[p.Spec.NodeName] = img
		case strings.HasPrefix(p.Name, "groundcloud-controller-manager-"):
			cms = append(cms, img)
		}
	}
	want := map[string]string{}
	for _, n := range c.Nodes {
		if n.LoadBalancer {
			want[n.Name] = r.Agent.Ref
			node, err := c.Client.CoreV1().Nodes().Get(t.Context(), n.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if node.Labels[c.HostLabel()] != "true" {
				t.Errorf("load-balancer host %s lacks %s=true: %v", n.Name, c.HostLabel(), node.Labels)
			}
		}
	}
	if !mapsEqual(agents, want) {
		t.Errorf("agents (node: image) %v, want %v", agents, want)
	}
	if len(cms) == 0 || slices.ContainsFunc(cms, func(img string) bool { return img != r.ControllerManager.Ref }) {
		t.Errorf("controller manager images %v, want %s", cms, r.ControllerManager.Ref)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// checkService checks that Service name keeps the addresses it was first
// given, in its status and its LoadBalancer object, which is Ready for its
// latest generation, every address held by a host.
func (l *upgradeLane) checkService(t *testing.T, name string) {
	want := l.addrs[name]
	eventually(t, "Service "+name+" and its LoadBalancer as before, Ready", func(ctx context.Context) bool {
		svc, err := l.s.c.Client.CoreV1().Services(echoNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		var got []netip.Addr
		for _, in := range svc.Status.LoadBalancer.Ingress {
			got = append(got, netip.MustParseAddr(in.IP))
		}
		if !slices.Equal(got, want) {
			t.Logf("Service %s: status %v, want %v", name, got, want)
			return false
		}
		lb, err := lbapi.NewClient(l.s.dyn).Get(ctx, echoNS, name)
		if err != nil {
			return false
		}
		return lbServes(t, lb, svc, want)
	})
}

// lbServes reports whether lb is svc's, with addresses want, Ready for its
// generation, each address held or advertised.
func lbServes(t *testing.T, lb *v1alpha1.LoadBalancer, svc *corev1.Service, want []netip.Addr) bool {
	if len(lb.OwnerReferences) == 0 || lb.OwnerReferences[0].UID != svc.UID {
		t.Logf("LoadBalancer %s: owners %v, want Service %s", lb.Name, lb.OwnerReferences, svc.UID)
		return false
	}
	var addrs []netip.Addr
	for _, a := range lb.Spec.Addresses {
		addrs = append(addrs, netip.MustParseAddr(a))
	}
	if !slices.Equal(addrs, want) {
		t.Logf("LoadBalancer %s: addresses %v, want %v", lb.Name, addrs, want)
		return false
	}
	ready := meta.FindStatusCondition(lb.Status.Conditions, v1alpha1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionTrue || lb.Status.ObservedGeneration != lb.Generation {
		return false
	}
	// Held on a host's link, or advertised over BGP by some host.
	served := map[string]bool{}
	for _, a := range lb.Status.Addresses {
		if a.Host != "" {
			served[a.Address] = true
		}
	}
	for _, h := range lb.Status.Hosts {
		for _, a := range h.Announcing {
			served[a] = true
		}
	}
	for _, a := range want {
		if !served[a.String()] {
			return false
		}
	}
	return true
}

// report logs what each Service's client saw since the last step and
// fails if new connections do not work at its end.
func (l *upgradeLane) report(t *testing.T, name string, began time.Time) {
	t.Helper()
	end := time.Now()
	for _, k := range upgradeKinds {
		c := l.clients[k.name]
		o := availability.Measure(c.Attempts(), began, l.since, end)
		t.Logf("%s: %s: new connections: %d attempts, %d failed, gap %s", name, k.name, o.Attempts, o.Failed, o.Gap.Round(time.Millisecond))
		for i, conn := range c.Conns() {
			t.Logf("%s: %s: long-lived connection %d to %s: %d pings, longest wait %s, err %v", name, k.name, i, conn.Node, conn.Pings, conn.MaxStall.Round(time.Millisecond), conn.Err)
		}
		// Which hosts held the address meanwhile. Logged only: the
		// previous release's agents, stopping while the other host's new
		// agent holds down, leave it held by none for a second or more,
		// and its take-back removes before it adds. This version's
		// rolling update is checked without another release in
		// TestCluster ("agents rolled out").
		changes := l.s.holders.Changes(l.addrs[k.name][0], began)
		t.Logf("%s: %s: holders of %s: %s", name, k.name, l.addrs[k.name][0], holderChanges(changes, began))
		if k.hitless && o.Failed > 0 {
			t.Errorf("%s: %s: %d of %d new connections failed (gap %s), want none", name, k.name, o.Failed, o.Attempts, o.Gap.Round(time.Millisecond))
		}
		if o.Unrecovered {
			t.Errorf("%s: %s: new connections still failing at the end: %+v", name, k.name, o)
		}
		// After the rollouts: every new connection answered.
		if tail := availability.Measure(c.Attempts(), end, end.Add(-3*time.Second), end); tail.Failed > 0 {
			t.Errorf("%s: %s: %d of %d new connections failed in the last 3 s", name, k.name, tail.Failed, tail.Attempts)
		}
	}
	l.since = end
}

// holderChanges prints changes as "+offset: hosts" after began.
func holderChanges(changes []availability.Change, began time.Time) string {
	var parts []string
	for _, ch := range changes {
		hosts := strings.Join(ch.Hosts, ",")
		if hosts == "" {
			hosts = "none"
		}
		parts = append(parts, fmt.Sprintf("+%s %s", ch.At.Sub(began).Round(10*time.Millisecond), hosts))
	}
	return strings.Join(parts, "; ")
}

package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	cloudapi "k8s.io/cloud-provider/api"
)

const inventoryConfig = `
[Global]
region = home

[Machine "web-1"]
zone = rack-1
instance-type = nuc-13
internal-ip = 192.0.2.11
external-ip = 198.51.100.11
hostname = web-1.lab
internal-dns = web-1.lab.internal
label = example.com/shelf=top
label = example.com/owner=ops

[Machine "old-1"]
zone = rack-2
internal-ip = 192.0.2.12
state = gone

[Machine "sleepy-1"]
zone = rack-2
internal-ip = 192.0.2.13
state = shutdown
`

// TestNodeInitialisation: a Node registered as kubelet --cloud-provider=external
// registers it gets the inventory's provider ID, addresses, topology and
// instance-type labels and extra labels, and loses the uninitialized taint.
func TestNodeInitialisation(t *testing.T) {
	ctx := context.Background()
	cl := startCluster(t, inventoryConfig)

	createKubeletNode(t, cl.client, "web-1", v1.ConditionUnknown)
	// The cloud-node controller writes the spec (providerID, labels, taint)
	// and then, in a second request, the addresses.
	node := waitNode(t, cl.client, "web-1", "initialised", func(n *v1.Node) bool {
		return n.Spec.ProviderID != "" && !hasTaint(n, cloudapi.TaintExternalCloudProvider) && len(n.Status.Addresses) > 0
	})

	if got, want := node.Spec.ProviderID, "groundcloud://home/web-1"; got != want {
		t.Errorf("providerID = %q, want %q", got, want)
	}
	wantLabels := map[string]string{
		v1.LabelTopologyZone:       "rack-1",
		v1.LabelTopologyRegion:     "home",
		v1.LabelInstanceTypeStable: "nuc-13",
		"example.com/shelf":        "top",
		"example.com/owner":        "ops",
	}
	for k, want := range wantLabels {
		if got := node.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	wantAddrs := map[v1.NodeAddressType]string{
		v1.NodeInternalIP:  "192.0.2.11",
		v1.NodeExternalIP:  "198.51.100.11",
		v1.NodeHostName:    "web-1.lab",
		v1.NodeInternalDNS: "web-1.lab.internal",
	}
	got := map[v1.NodeAddressType]string{}
	for _, a := range node.Status.Addresses {
		got[a.Type] = a.Address
	}
	for typ, want := range wantAddrs {
		if got[typ] != want {
			t.Errorf("address %s = %q, want %q (all: %v)", typ, got[typ], want, node.Status.Addresses)
		}
	}

	// kubectl, the real client, sees the same.
	out, err := cl.cp.Kubectl(ctx, "get", "nodes", "-L", v1.LabelTopologyZone, "--no-headers")
	if err != nil {
		t.Fatalf("kubectl get nodes: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "web-1") || !strings.Contains(string(out), "rack-1") {
		t.Errorf("kubectl get nodes does not show web-1 in rack-1:\n%s", out)
	}
}

// TestNodeLifecycle: NotReady nodes whose machine is gone are deleted, those
// shut down are tainted, and a node the non-authoritative inventory does not
// know is left alone.
func TestNodeLifecycle(t *testing.T) {
	ctx := context.Background()
	cl := startCluster(t, inventoryConfig)

	for _, name := range []string{"old-1", "sleepy-1", "stranger-1"} {
		createKubeletNode(t, cl.client, name, v1.ConditionFalse)
	}

	waitNode(t, cl.client, "sleepy-1", "shutdown taint", func(n *v1.Node) bool {
		return hasTaint(n, cloudapi.TaintNodeShutdown)
	})
	waitGone(t, cl.client, "old-1")

	// The lifecycle controller has now been through every node at least
	// once; give it several more periods and make sure the stranger stays.
	time.Sleep(4 * monitorPeriod)
	stranger, err := cl.client.CoreV1().Nodes().Get(ctx, "stranger-1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("node of a machine the non-authoritative inventory does not list was removed: %v", err)
	}
	if got, want := stranger.Spec.ProviderID, "groundcloud://home/stranger-1"; got != want {
		t.Errorf("stranger providerID = %q, want %q (initialised from its name)", got, want)
	}
	if _, ok := stranger.Labels[v1.LabelTopologyZone]; ok {
		t.Errorf("stranger got a zone label: %v", stranger.Labels)
	}
}

// TestConfigReload: a new machine added to the file is picked up without a
// restart; a broken rewrite changes nothing and every problem is logged.
func TestConfigReload(t *testing.T) {
	authoritative := "[Global]\nregion = home\nauthoritative-inventory = true\n\n[Machine \"web-1\"]\nzone = rack-1\ninternal-ip = 192.0.2.11\n"
	cl := startCluster(t, authoritative)

	// Unknown to an authoritative inventory: a Ready node stays
	// uninitialised; a NotReady one is reported gone and deleted (by the
	// same lifecycle pass that looked at late-1, so late-1 has been judged).
	createKubeletNode(t, cl.client, "late-1", v1.ConditionTrue)
	createKubeletNode(t, cl.client, "stray-1", v1.ConditionUnknown)
	createKubeletNode(t, cl.client, "web-1", v1.ConditionFalse)
	waitNode(t, cl.client, "web-1", "initialised", func(n *v1.Node) bool { return n.Spec.ProviderID != "" })
	waitGone(t, cl.client, "stray-1")
	if n := getNode(t, cl.client, "late-1"); n.Spec.ProviderID != "" || !hasTaint(n, cloudapi.TaintExternalCloudProvider) {
		t.Fatalf("late-1 initialised before its machine was in the inventory: %+v", n.Spec)
	}

	writeFile(t, cl.configPath, authoritative+"\n[Machine \"late-1\"]\nzone = rack-9\ninternal-ip = 192.0.2.99\n")
	late := waitNode(t, cl.client, "late-1", "initialised after reload", func(n *v1.Node) bool {
		return n.Spec.ProviderID != "" && !hasTaint(n, cloudapi.TaintExternalCloudProvider)
	})
	if late.Labels[v1.LabelTopologyZone] != "rack-9" {
		t.Errorf("late-1 zone = %q, want rack-9", late.Labels[v1.LabelTopologyZone])
	}

	// A broken file that would also declare web-1 gone: had it been applied,
	// the NotReady web-1 would be deleted.
	broken := "[Global]\nregion = home\nauthoritative-inventory = true\n\n[Machine \"web-1\"]\nstate = gone\nzone = \n\n[Machine \"late-1\"]\nflavour = big\n"
	writeFile(t, cl.configPath, broken)
	waitLog(t, cl.ccmLog, "Invalid cloud-config")
	time.Sleep(4 * monitorPeriod)
	getNode(t, cl.client, "web-1")
	logText := readFile(t, cl.ccmLog)
	for _, want := range []string{":7:", "zone", ":10:", "flavour"} {
		if !strings.Contains(logText, want) {
			t.Errorf("log of the broken reload does not mention %q", want)
		}
	}
}

// TestInvalidConfigAtStart: the binary exits non-zero and prints every
// problem with its line.
func TestInvalidConfigAtStart(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: runs the controller manager binary")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "cloud.conf")
	writeFile(t, path, "[Global]\nregion = home\ncolour = blue\n\n[Machine \"a\"]\ninternal-ip = 300.1.2.3\nstate = melted\n\n[Pool \"p1\"]\naddresses = 192.0.2.0/24\n\n[Pool \"p2\"]\naddresses = 192.0.2.128/25\n")
	kubeconfig := filepath.Join(dir, "none.kubeconfig")
	writeFile(t, kubeconfig, "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\"}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\nusers: [{name: u, user: {token: x}}]\n")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, ccmBinary, "--cloud-config="+path, "--kubeconfig="+kubeconfig, "--secure-port=0", "--leader-elect=false")
	out, err := cmd.CombinedOutput()
	var exitErr *exec.ExitError
	if err == nil || !errors.As(err, &exitErr) || exitErr.ExitCode() == 0 {
		t.Fatalf("want a non-zero exit, got %v\n%s", err, out)
	}
	for _, want := range []string{"cloud.conf:3:", "colour", "cloud.conf:6:", "300.1.2.3", "cloud.conf:7:", "melted", "cloud.conf:13:", "p1"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output does not mention %q:\n%s", want, out)
		}
	}
}

func getNode(t *testing.T, c kubernetes.Interface, name string) *v1.Node {
	t.Helper()
	n, err := c.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get node %s: %v", name, err)
	}
	return n
}

func waitGone(t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	eventually(t, "node "+name+" deleted", func() bool {
		_, err := c.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	// Write then rename, as config management and kubelet volume updates do.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

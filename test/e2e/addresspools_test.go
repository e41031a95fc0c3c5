package e2e

import (
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/groundcloud/groundcloud/internal/addresspools"
)

// TestAddressPools: `kubectl get addresspools`, through the pinned kubectl,
// shows each pool of the cloud-config with its families, size, used, free
// and orphaned addresses and ranges, written by the controller manager
// under its own ServiceAccount and rules (deploy/): at start, after
// allocations, after a reload that orphans addresses, and after one that
// removes a pool and adds another (the removed pool's object is deleted).
// Nothing is written while nothing changes. (That nobody else may write
// one: test/framework/manifests TestOnlyTheControllerManagerWritesAddressPools.)
// `kubectl get loadbalancers` prints addresses as plain text.
func TestAddressPools(t *testing.T) {
	env := startLBEnv(t)
	const (
		v4 = "192.0.2.200-192.0.2.219"
		v6 = "2001:db8:0:1::c8-2001:db8:0:1::db"
	)
	env.wantPools(t, map[string]string{
		"default":  "IPv4,IPv6 20,20 0,0 20,20 0 " + v4 + "," + v6,
		"reserved": "IPv4 10 0 10 0 192.0.2.220-192.0.2.229",
	})
	out, err := env.cp.Kubectl(t.Context(), "get", "addresspools")
	if err != nil {
		t.Fatalf("kubectl get addresspools: %v\n%s", err, out)
	}
	if header := strings.Fields(strings.SplitN(string(out), "\n", 2)[0]); !slices.Equal(header, []string{"NAME", "FAMILIES", "SIZE", "USED", "FREE", "ORPHANED", "RANGES", "AGE"}) {
		t.Errorf("columns %v", header)
	}
	t.Logf("kubectl get addresspools:\n%s", out)

	env.create(t, newService("web", withPort(v1.ProtocolTCP, 80, env.nodePort(t))))
	env.create(t, newService("dual", withDualStack(), withPort(v1.ProtocolTCP, 80, env.nodePort(t))))
	// The controller manager may serve either first: the rows below are
	// compared with what each got.
	web, dual := env.addresses(t, "web", 1), env.addresses(t, "dual", 2)
	env.wantPools(t, map[string]string{
		"default":  "IPv4,IPv6 20,20 2,1 18,19 0 " + v4 + "," + v6,
		"reserved": "IPv4 10 0 10 0 192.0.2.220-192.0.2.229",
	})

	// Addresses as text: one cell, no JSON list.
	out, err = env.cp.Kubectl(t.Context(), "get", "loadbalancers", "-n", "default", "--no-headers", "-o", "wide")
	if err != nil {
		t.Fatalf("kubectl get loadbalancers: %v\n%s", err, out)
	}
	rows := kubectlRows(string(out))
	for name, want := range map[string]string{"web": addrsText(web), "dual": addrsText(dual)} {
		if row := rows[name]; len(row) < 2 || row[1] != want {
			t.Errorf("loadbalancer %s: row %q, want addresses %s", name, row, want)
		}
	}
	t.Logf("kubectl get loadbalancers:\n%s", out)

	// Nothing changes, nothing is written.
	rv := env.addressPool(t, "default").GetResourceVersion()
	time.Sleep(3 * addresspools.DefaultInterval)
	if again := env.addressPool(t, "default").GetResourceVersion(); again != rv {
		t.Errorf("AddressPool default written again though nothing changed (%s, then %s)", rv, again)
	}

	// A reload that leaves both IPv4 addresses outside the range: web and
	// dual keep them (3 addresses orphaned, dual's IPv6 one with its IPv4
	// one, as groundcloud_pool_orphaned_addresses counts them), and only
	// dual's IPv6 address is in the ranges.
	env.setCloudConfig(t, "addresses = "+v4, "addresses = 192.0.2.202-192.0.2.219")
	env.wantPools(t, map[string]string{
		"default":  "IPv4,IPv6 18,20 0,1 18,19 3 192.0.2.202-192.0.2.219," + v6,
		"reserved": "IPv4 10 0 10 0 192.0.2.220-192.0.2.229",
	})

	// A pool removed, another added.
	env.setCloudConfig(t, "[Pool \"reserved\"]\naddresses = 192.0.2.220-192.0.2.229\nauto-assign = false\n", "[Pool \"extra\"]\naddresses = 192.0.2.232-192.0.2.239\n")
	env.wantPools(t, map[string]string{
		"default": "IPv4,IPv6 18,20 0,1 18,19 3 192.0.2.202-192.0.2.219," + v6,
		"extra":   "IPv4 8 0 8 0 192.0.2.232/29",
	})
	if _, err := env.dyn.Resource(addresspools.Resource).Get(t.Context(), "reserved", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("AddressPool reserved after its pool was removed: %v, want NotFound", err)
	}
}

// wantPools waits until `kubectl get addresspools` shows exactly the rows
// of want: by name, the columns but AGE, joined by spaces.
func (env *lbEnv) wantPools(t *testing.T, want map[string]string) {
	t.Helper()
	var got map[string]string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kubectl get addresspools as last seen:\n%s", cmp.Diff(want, got))
		}
	})
	eventually(t, "kubectl get addresspools to show "+strings.Join(slices.Sorted(maps.Keys(want)), ","), func() bool {
		out, err := env.cp.Kubectl(t.Context(), "get", "addresspools", "--no-headers")
		if err != nil {
			return false
		}
		got = map[string]string{}
		for name, row := range kubectlRows(string(out)) {
			got[name] = strings.Join(row[1:len(row)-1], " ") // without NAME and AGE
		}
		return maps.Equal(got, want)
	})
}

// kubectlRows splits kubectl's table output (without headers) into rows
// by their first column.
func kubectlRows(out string) map[string][]string {
	rows := map[string][]string{}
	for line := range strings.Lines(out) {
		if f := strings.Fields(line); len(f) > 0 {
			rows[f[0]] = f
		}
	}
	return rows
}

func (env *lbEnv) addressPool(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	ap, err := env.dyn.Resource(addresspools.Resource).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ap
}

// addrsText is addrs as kubectl prints a LoadBalancer's addresses: IPv4
// first, joined by commas.
func addrsText(addrs []netip.Addr) string {
	sorted := slices.Clone(addrs)
	slices.SortFunc(sorted, func(a, b netip.Addr) int {
		if a.Is4() != b.Is4() {
			if a.Is4() {
				return -1
			}
			return 1
		}
		return a.Compare(b)
	})
	var parts []string
	for _, a := range sorted {
		parts = append(parts, a.String())
	}
	return strings.Join(parts, ",")
}

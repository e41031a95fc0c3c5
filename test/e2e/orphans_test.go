package e2e

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/annotation"
	"github.com/groundcloud/groundcloud/internal/ipam"
	"github.com/groundcloud/groundcloud/internal/lbapi"
	"github.com/groundcloud/groundcloud/internal/loadbalancers"
)

// freePort returns a TCP port of 127.0.0.1 that nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// ccmMetricArgs serve the controller manager's /metrics on port, to anyone:
// the tests read it without credentials.
func ccmMetricArgs(port int) []string {
	return []string{
		"--secure-port=" + strconv.Itoa(port),
		"--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
		"--authentication-skip-lookup",
	}
}

// ccmMetric reads one sample of the controller manager's /metrics: the
// value of the line that starts with series (name{labels}), and whether
// there is one.
func (env *lbEnv) ccmMetric(t *testing.T, series string) (float64, bool) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // the controller manager's self-signed serving certificate
	}}
	resp, err := c.Get(fmt.Sprintf("https://127.0.0.1:%d/metrics", env.ccmMetricsPort))
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			n, err := strconv.ParseFloat(v, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// waitMetric waits until the controller manager reports want for series.
func (env *lbEnv) waitMetric(t *testing.T, series string, want float64) {
	t.Helper()
	var last float64
	var seen bool
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s: last read %v (present: %v)", series, last, seen)
		}
	})
	eventually(t, fmt.Sprintf("%s = %v", series, want), func() bool {
		last, seen = env.ccmMetric(t, series)
		return seen && last == want
	})
}

// orphanCondition returns the LoadBalancer's AddressOrphaned condition, or nil.
func (env *lbEnv) orphanCondition(t *testing.T, name string) *metav1.Condition {
	t.Helper()
	lb, err := lbapi.NewClient(env.dyn).Get(t.Context(), "default", name)
	if err != nil {
		t.Fatal(err)
	}
	return meta.FindStatusCondition(lb.Status.Conditions, v1alpha1.ConditionAddressOrphaned)
}

// event waits for an Event of the type and reason on Service ns/name whose
// message contains text.
func (env *lbEnv) event(t *testing.T, ns, name, typ, reason, text string) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s %s event %q on service %s/%s", typ, reason, text, ns, name), func() bool {
		evs, err := env.client.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Service,involvedObject.name=" + name + ",type=" + typ + ",reason=" + reason,
		})
		if err != nil {
			return false
		}
		for _, e := range evs.Items {
			if strings.Contains(e.Message, text) {
				return true
			}
		}
		return false
	})
}

// setCloudConfig rewrites the controller manager's cloud-config, replacing
// old with new; the controller manager reloads it within a second.
func (env *lbEnv) setCloudConfig(t *testing.T, old, new string) {
	t.Helper()
	b, err := os.ReadFile(env.CloudConfig)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("the cloud-config has no %q:\n%s", old, b)
	}
	writeFile(t, env.CloudConfig, strings.Replace(string(b), old, new, 1))
}

// testOrphanedAddress: a reload that leaves a Service's address outside its
// pool keeps the address and its traffic, and reports it — metric, log
// line, AddressOrphaned condition beside the agent's Ready, Warning Event;
// putting the range back removes the condition, with a Normal Event, and the
// metric drops to 0. The status is written by the controller manager's own
// ServiceAccount and rules (deploy/), by server-side apply.
func (env *lbEnv) testOrphanedAddress(t *testing.T) {
	const (
		fullRange   = "addresses = 192.0.2.220-192.0.2.229"
		shrunkRange = "addresses = 192.0.2.220-192.0.2.227"
		series      = `groundcloud_pool_orphaned_addresses{pool="reserved"}`
	)
	vip := netip.MustParseAddrPort("192.0.2.228:80")
	env.create(t, newService("kept", withPort(v1.ProtocolTCP, 80, env.nodePort(t)), withAnnotation(annotation.LoadBalancerIPs, vip.Addr().String())))
	if got := env.addresses(t, "kept", 1)[0]; got != vip.Addr() {
		t.Fatalf("kept got %s, want %s", got, vip.Addr())
	}
	env.nodesReached(t, vip, env.nodeNames()...)
	env.waitMetric(t, series, 0)

	env.setCloudConfig(t, fullRange, shrunkRange)
	t.Cleanup(func() {
		if b, _ := os.ReadFile(env.CloudConfig); strings.Contains(string(b), shrunkRange) {
			env.setCloudConfig(t, shrunkRange, fullRange)
		}
	})
	env.event(t, "default", "kept", v1.EventTypeWarning, loadbalancers.ReasonAddressOrphaned, `192.0.2.228 kept outside the pools: 192.0.2.228 is not in pool "reserved"`)
	env.waitMetric(t, series, 1)
	eventually(t, "the orphan's log line", func() bool {
		b, _ := os.ReadFile(env.CCMLog())
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, `"Address kept outside the pools; the operator must resolve it"`) &&
				strings.Contains(line, `service="default/kept"`) && strings.Contains(line, `cause="AddressNotInPool"`) {
				return true
			}
		}
		return false
	})
	c := env.orphanCondition(t, "kept")
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != string(ipam.OrphanAddressNotInPool) || !strings.Contains(c.Message, "docs/controller-manager.md#orphaned-addresses") {
		t.Fatalf("AddressOrphaned condition = %+v, want True, AddressNotInPool, with what to do", c)
	}
	lb, err := lbapi.NewClient(env.dyn).Get(t.Context(), "default", "kept")
	if err != nil {
		t.Fatal(err)
	}
	if r := meta.FindStatusCondition(lb.Status.Conditions, v1alpha1.ConditionReady); r == nil || r.Status != metav1.ConditionTrue {
		t.Errorf("the agent's Ready condition is gone or false beside AddressOrphaned: %+v", lb.Status.Conditions)
	}
	if len(lb.Spec.Addresses) != 1 || lb.Spec.Addresses[0] != vip.Addr().String() {
		t.Errorf("LoadBalancer addresses %v, want %s kept", lb.Spec.Addresses, vip.Addr())
	}
	if _, _, err := who(t.Context(), env.inside, vip); err != nil {
		t.Errorf("the orphaned %s no longer carries traffic: %v", vip, err)
	}
	out, err := env.cp.Kubectl(t.Context(), "get", "loadbalancers", "-A", "-o",
		`custom-columns=NAMESPACE:.metadata.namespace,NAME:.metadata.name,ADDRESSES:.spec.addresses,ORPHANED:.status.conditions[?(@.type=="AddressOrphaned")].reason`)
	if err != nil || !strings.Contains(string(out), "AddressNotInPool") {
		t.Errorf("the documented kubectl command does not show the orphan: %v\n%s", err, out)
	}

	env.setCloudConfig(t, shrunkRange, fullRange)
	env.event(t, "default", "kept", v1.EventTypeNormal, loadbalancers.ReasonAddressOrphanResolved, "in a pool")
	env.waitMetric(t, series, 0)
	eventually(t, "AddressOrphaned condition removed", func() bool { return env.orphanCondition(t, "kept") == nil })
	lb, err = lbapi.NewClient(env.dyn).Get(t.Context(), "default", "kept")
	if err != nil {
		t.Fatal(err)
	}
	if r := meta.FindStatusCondition(lb.Status.Conditions, v1alpha1.ConditionReady); r == nil {
		t.Errorf("removing AddressOrphaned removed the agent's Ready too: %+v", lb.Status.Conditions)
	}
}

// testSharingKeyStaysInItsNamespace: a Service of another namespace with
// the same sharing key cannot add a port to a shared address; the Warning
// names neither the Services nor the key.
func (env *lbEnv) testSharingKeyStaysInItsNamespace(t *testing.T, shared netip.Addr, key string) {
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "intruder"}}
	if _, err := env.client.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := newService("reach", withPort(v1.ProtocolTCP, 82, env.nodePort(t)),
		withAnnotation(annotation.AllowSharedIP, key), withAnnotation(annotation.LoadBalancerIPs, shared.String()))
	svc.Namespace = ns.Name
	env.create(t, svc)
	env.event(t, ns.Name, "reach", v1.EventTypeWarning, "SyncLoadBalancerFailed",
		shared.String()+" is held by a Service of another namespace")
	evs, err := env.client.CoreV1().Events(ns.Name).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=reach"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if strings.Contains(e.Message, "share-a") || strings.Contains(e.Message, `"`+key+`"`) {
			t.Errorf("event on the other namespace's Service reveals the sharers: %q", e.Message)
		}
	}
	if _, err := lbapi.NewClient(env.dyn).Get(t.Context(), ns.Name, "reach"); err == nil {
		t.Errorf("intruder/reach has a LoadBalancer despite the error")
	}
}

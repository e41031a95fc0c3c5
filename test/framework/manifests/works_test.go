package manifests

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	cloudapi "k8s.io/cloud-provider/api"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/agent"
	"github.com/groundcloud/groundcloud/internal/dataplane"
	"github.com/groundcloud/groundcloud/internal/kubecore"
	"github.com/groundcloud/groundcloud/internal/lbapi"
	"github.com/groundcloud/groundcloud/test/framework/controlplane"
)

// worksConfig is the cloud-config of TestComponentsWorkWithTheirRules.
// Its addresses are documentation ranges; no node is ever a load-balancer
// backend (see excludeFromLB), so nothing probes them.
const worksConfig = `
[Global]
region = home

[Machine "web-1"]
zone = rack-1
internal-ip = 192.0.2.11

[Machine "old-1"]
internal-ip = 192.0.2.12
state = gone

[Machine "sleepy-1"]
internal-ip = 192.0.2.13
state = shutdown

[Pool "default"]
addresses = 198.51.100.200-198.51.100.210
`

// excludeFromLB keeps a Node out of every load balancer's backends.
const excludeFromLB = corev1.LabelNodeExcludeBalancers

// TestComponentsWorkWithTheirRules shows the rules are enough: the real
// controller manager, with the Deployment's own arguments, and the agent,
// each with a token of its ServiceAccount and nothing but deploy/'s RBAC,
// do their whole job — install the CRDs, lead, initialise, taint and delete
// Nodes, give a Service an address and take it back, answer probes, check
// scrapers through delegated authentication and authorization, write
// LoadBalancer status — and the controller manager logs no "forbidden".
// (TestPermissions shows the rules are no more than that.)
func TestComponentsWorkWithTheirRules(t *testing.T) {
	objs := renderDeploy(t)
	cp := controlplane.StartT(t, controlplane.Options{Users: []controlplane.User{}})
	ctx := t.Context()
	admin := cp.Client()

	// Everything but the CRDs: the controller manager installs them itself.
	var crds []string
	install := slices.DeleteFunc(slices.Clone(objs), func(o *unstructured.Unstructured) bool {
		if o.GetKind() != "CustomResourceDefinition" {
			return false
		}
		crds = append(crds, o.GetName())
		return true
	})
	if err := applyAll(t, cp, install); err != nil {
		t.Fatal(err)
	}
	ccmKubeconfig, err := cp.ServiceAccountKubeconfig(ctx, "kube-system", "groundcloud-controller-manager")
	if err != nil {
		t.Fatal(err)
	}
	agentKubeconfig, err := cp.ServiceAccountKubeconfig(ctx, "kube-system", "groundcloud-agent")
	if err != nil {
		t.Fatal(err)
	}

	ccm := startControllerManager(t, object[appsv1.Deployment](t, objs, "Deployment", "groundcloud-controller-manager"), ccmKubeconfig)
	t.Cleanup(func() {
		if lines := ccm.forbidden(); len(lines) > 0 {
			t.Errorf("the controller manager was refused something:\n%s", strings.Join(lines, "\n"))
		}
	})

	// Without these nothing else can work: stop at the first that fails.
	// As the kubelet probes: HTTPS, no credentials, no verification.
	waitFor(t, "/healthz to answer 200", 60*time.Second, func() (bool, error) {
		code, err := ccm.get("/healthz", "")
		return code == http.StatusOK, err
	})
	waitFor(t, "the controller manager to hold its Lease", 60*time.Second, func() (bool, error) {
		l, err := admin.CoordinationV1().Leases("kube-system").Get(ctx, "groundcloud-controller-manager", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", err
	})
	waitFor(t, "the controller manager to install the CRDs", 60*time.Second, func() (bool, error) {
		_, err := cp.Kubectl(ctx, append([]string{"get", "crd"}, crds...)...)
		return err == nil, nil
	})

	for _, n := range []struct {
		name  string
		ready corev1.ConditionStatus
	}{{"web-1", corev1.ConditionUnknown}, {"old-1", corev1.ConditionFalse}, {"sleepy-1", corev1.ConditionFalse}} {
		createKubeletNode(t, admin, n.name, n.ready)
	}
	t.Run("node initialised", func(t *testing.T) {
		waitNode(t, admin, "web-1", func(n *corev1.Node) bool {
			return n.Spec.ProviderID == "groundcloud://home/web-1" && !hasTaint(n, cloudapi.TaintExternalCloudProvider) &&
				n.Labels[corev1.LabelTopologyZone] == "rack-1" &&
				slices.Contains(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "192.0.2.11"})
		})
	})
	t.Run("shut-down node tainted", func(t *testing.T) {
		waitNode(t, admin, "sleepy-1", func(n *corev1.Node) bool { return hasTaint(n, cloudapi.TaintNodeShutdown) })
	})
	t.Run("gone node deleted", func(t *testing.T) {
		waitFor(t, "old-1 to be deleted", 60*time.Second, func() (bool, error) {
			_, err := admin.CoreV1().Nodes().Get(ctx, "old-1", metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	})

	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Ports:    []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
			Selector: map[string]string{"app": "web"},
		},
	}
	if _, err := admin.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Run("service address", func(t *testing.T) {
		waitFor(t, "an address and the cleanup finalizer on Service web", 60*time.Second, func() (bool, error) {
			s, err := admin.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			ing := s.Status.LoadBalancer.Ingress
			return len(ing) == 1 && strings.HasPrefix(ing[0].IP, "198.51.100.") &&
				slices.Contains(s.Finalizers, "service.kubernetes.io/load-balancer-cleanup"), nil
		})
		waitFor(t, "an EnsuredLoadBalancer event", 30*time.Second, func() (bool, error) {
			evs, err := admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=web"})
			if err != nil {
				return false, err
			}
			return slices.ContainsFunc(evs.Items, func(e corev1.Event) bool { return e.Reason == "EnsuredLoadBalancer" }), nil
		})
	})

	// The agent runs from here to the end, seeing the Service come and go.
	runAgent(t, agentKubeconfig, "lb-1")
	t.Run("agent status", func(t *testing.T) {
		dyn, err := dynamic.NewForConfig(cp.RESTConfig())
		if err != nil {
			t.Fatal(err)
		}
		lbs := lbapi.NewClient(dyn)
		// Its status write went through: its Programmed condition for this
		// generation. Its value is the agent's tests' concern (here no
		// node answers a health check and the pretend host has no links,
		// so it is False); that the agent can write it is this one's.
		waitFor(t, "the agent to report its Programmed condition", 60*time.Second, func() (bool, error) {
			lb, err := lbs.Get(ctx, "default", "web")
			if err != nil {
				return false, err
			}
			for _, h := range lb.Status.Hosts {
				c := meta.FindStatusCondition(h.Conditions, v1alpha1.ConditionProgrammed)
				if h.Name == "lb-1" && c != nil && c.ObservedGeneration == lb.Generation {
					t.Logf("lb-1's Programmed condition: %s, %s: %s", c.Status, c.Reason, c.Message)
					return true, nil
				}
			}
			return false, nil
		})
	})

	t.Run("metrics through delegated authorization", func(t *testing.T) {
		// A scraper allowed GET /metrics gets them: the controller manager
		// checked its token (TokenReview) and its right
		// (SubjectAccessReview) with its own credentials.
		scraper := serviceAccountToken(t, cp, "kube-system", "metrics-scraper")
		grantMetrics(t, admin, "metrics-scraper")
		waitFor(t, "/metrics to answer 200 to a scraper", 30*time.Second, func() (bool, error) {
			code, err := ccm.get("/metrics", scraper)
			return code == http.StatusOK, err
		})
		// And refuses someone who is not allowed.
		if code, err := ccm.get("/metrics", serviceAccountToken(t, cp, "kube-system", "groundcloud-agent")); err != nil || code != http.StatusForbidden {
			t.Errorf("/metrics for the agent's token: %d %v, want 403", code, err)
		}
	})

	if err := admin.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Run("service released", func(t *testing.T) {
		waitFor(t, "Service web to go (the finalizer removed)", 60*time.Second, func() (bool, error) {
			_, err := admin.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		waitFor(t, "LoadBalancer web to go", 30*time.Second, func() (bool, error) {
			_, err := cp.Kubectl(ctx, "get", "loadbalancers.groundcloud.io", "-n", "default", "web")
			return err != nil && strings.Contains(err.Error(), "NotFound"), nil
		})
	})
}

// controllerManager is a running groundcloud-controller-manager.
type controllerManager struct {
	url string
	log string
}

// startControllerManager builds the controller manager and runs it with
// the Deployment's arguments, the cloud-config moved from the Secret's
// mount into a temp directory, and the ServiceAccount's kubeconfig where
// the Pod would use in-cluster credentials.
func startControllerManager(t *testing.T, d *appsv1.Deployment, kubeconfig string) *controllerManager {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	build := exec.CommandContext(t.Context(), "go", "build", "-o", dir+"/", "./cmd/groundcloud-controller-manager")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the controller manager: %v\n%s", err, out)
	}

	c := d.Spec.Template.Spec.Containers[0]
	mount := ""
	for _, m := range c.VolumeMounts {
		if m.Name == "cloud-config" {
			mount = m.MountPath
		}
	}
	if mount == "" {
		t.Fatalf("no cloud-config mount in %+v", c.VolumeMounts)
	}
	if err := os.WriteFile(filepath.Join(dir, "cloud.conf"), []byte(worksConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	var args []string
	for _, a := range c.Args {
		args = append(args, strings.ReplaceAll(a, mount+"/", dir+"/"))
	}
	args = append(args,
		"--kubeconfig="+kubeconfig,
		"--authentication-kubeconfig="+kubeconfig,
		"--authorization-kubeconfig="+kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(port), // replaces the Deployment's 10258
		"--node-monitor-period=1s",
		"--v=2",
	)
	cm := &controllerManager{url: "https://127.0.0.1:" + strconv.Itoa(port), log: filepath.Join(dir, "ccm.log")}
	logFile, err := os.Create(cm.log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(dir, "groundcloud-controller-manager"), args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		logFile.Close()
		if t.Failed() {
			t.Logf("controller manager args: %q", args)
			t.Logf("tail of %s:\n%s", cm.log, controlplane.LogTail(cm.log, 60))
		}
	})
	return cm
}

// get requests path from the secure port with a bearer token (none if
// empty), without verifying the self-signed serving certificate, as the
// kubelet's probes and most scrapers do.
func (cm *controllerManager) get(path, token string) (int, error) {
	client := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
	}
	defer client.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, cm.url+path, nil)
	if err != nil {
		return 0, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil // not listening yet
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// forbiddenLine matches what client-go and the controllers log when the
// apiserver refuses a request.
var forbiddenLine = regexp.MustCompile(`(?i)forbidden`)

// forbidden returns the log lines where the apiserver refused something.
func (cm *controllerManager) forbidden() []string {
	data, err := os.ReadFile(cm.log)
	if err != nil {
		return []string{err.Error()}
	}
	var lines []string
	for line := range strings.Lines(string(data)) {
		if forbiddenLine.MatchString(line) {
			lines = append(lines, strings.TrimSpace(line))
		}
	}
	return lines
}

// runAgent runs the agent in this process as host, with the
// ServiceAccount's kubeconfig and a data plane and addresses that only
// pretend: what is tested is its use of the API. Its log (client-go's
// informer logs through it too) must not say "forbidden".
func runAgent(t *testing.T, kubeconfig, host string) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	core, err := kubecore.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a := agent.New(agent.Config{
		Host:         host,
		Dynamic:      dyn,
		Nodes:        core.Nodes(), // its Node informer runs with the ServiceAccount's rules too
		DataPlane:    pretendDataPlane{},
		Addresses:    pretendAddresses{},
		Owner:        agent.AllAddresses{},
		MinSync:      50 * time.Millisecond,
		MaxSync:      time.Second,
		AnnounceEach: time.Hour,
	})
	log := &lockedBuffer{}
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(log), textlogger.Verbosity(2)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
		var refused []string
		for line := range strings.Lines(log.String()) {
			if forbiddenLine.MatchString(line) {
				refused = append(refused, strings.TrimSpace(line))
			}
		}
		if len(refused) > 0 {
			t.Errorf("the agent was refused something:\n%s", strings.Join(refused, "\n"))
		}
		if t.Failed() {
			t.Logf("agent log:\n%s", log.String())
		}
	})
}

// lockedBuffer is a bytes.Buffer safe for concurrent writers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type pretendDataPlane struct{}

func (pretendDataPlane) Sync(context.Context, dataplane.State) (dataplane.Result, error) {
	return dataplane.Result{}, nil
}
func (pretendDataPlane) ForceFullSync()                {}
func (pretendDataPlane) Cleanup(context.Context) error { return nil }

type pretendAddresses struct{}

func (pretendAddresses) Set(context.Context, []netip.Addr) error { return nil }
func (pretendAddresses) Announce(context.Context)                {}
func (pretendAddresses) Present(context.Context) ([]netip.Addr, error) {
	return nil, nil
}
func (pretendAddresses) Cleanup(context.Context) error { return nil }

// serviceAccountToken returns the bearer token of a ServiceAccount (made
// if missing) from the kubeconfig the test bed writes.
func serviceAccountToken(t *testing.T, cp *controlplane.ControlPlane, namespace, name string) string {
	t.Helper()
	path, err := cp.ServiceAccountKubeconfig(t.Context(), namespace, name)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.BearerToken
}

// grantMetrics lets a ServiceAccount of kube-system GET /metrics.
func grantMetrics(t *testing.T, admin kubernetes.Interface, sa string) {
	t.Helper()
	ctx := t.Context()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "test-metrics-reader"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "test-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "kube-system", Name: sa}},
	}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// createKubeletNode creates a Node as kubelet --cloud-provider=external
// registers it — tainted uninitialized, with the given Ready status — and
// out of every load balancer.
func createKubeletNode(t *testing.T, c kubernetes.Interface, name string, ready corev1.ConditionStatus) {
	t.Helper()
	ctx := t.Context()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name, excludeFromLB: ""}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{
			Key: cloudapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule,
		}}},
	}
	created, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create node %s: %v", name, err)
	}
	now := metav1.Now()
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		created.Status.Conditions = []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: ready, Reason: "KubeletNotReady",
			LastHeartbeatTime: now, LastTransitionTime: now,
		}}
		_, err := c.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			created, _ = c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		}
		return err
	})
	if err != nil {
		t.Fatalf("set status of node %s: %v", name, err)
	}
}

func waitNode(t *testing.T, c kubernetes.Interface, name string, ok func(*corev1.Node) bool) {
	t.Helper()
	waitFor(t, "node "+name, 60*time.Second, func() (bool, error) {
		n, err := c.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
		if err != nil || ok(n) {
			return err == nil, err
		}
		return false, fmt.Errorf("not yet: providerID %q, taints %v, labels %v, addresses %v", n.Spec.ProviderID, n.Spec.Taints, n.Labels, n.Status.Addresses)
	})
}

func hasTaint(n *corev1.Node, key string) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key })
}

// waitFor polls cond until it holds, failing the test after timeout with
// the last error.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		ok, err := cond()
		last = err
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last error: %v)", what, err, last)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

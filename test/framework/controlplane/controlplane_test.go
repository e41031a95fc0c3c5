package controlplane

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

func TestControlPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real control plane")
	}
	// Every child names a path under this TMPDIR, so /proc shows strays.
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)

	began := time.Now()
	cp := StartT(t, Options{})
	t.Logf("control plane started in %v", time.Since(began))
	ctx := t.Context()

	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "survivor", Namespace: "default"},
		Data:       map[string]string{"k": "v"},
	}
	if _, err := cp.Client().CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create configmap: %v", err)
	}
	checkConfigMap(t, cp.Client(), "v")

	out, err := cp.Kubectl(ctx, "version", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var version struct {
		ServerVersion struct{ GitVersion string } `json:"serverVersion"`
	}
	if err := json.Unmarshal(out, &version); err != nil {
		t.Fatalf("kubectl version: %v\n%s", err, out)
	}
	if v := version.ServerVersion.GitVersion; !strings.HasPrefix(v, "v1.37.") {
		t.Errorf("server version %q, want v1.37.x", v)
	}
	out, err = cp.Kubectl(ctx, "get", "ns")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(firstColumn(string(out)), "default") {
		t.Errorf("kubectl get ns has no default:\n%s", out)
	}

	checkComponentUser(t, cp, "groundcloud-agent")

	apiserverPID := cp.apiserver.pid()
	stopBegan := time.Now()
	if err := cp.StopAPIServer(); err != nil {
		t.Fatalf("stop apiserver: %v", err)
	}
	t.Logf("apiserver stopped in %v", time.Since(stopBegan))
	if !gone(apiserverPID) {
		t.Errorf("apiserver pid %d still there after StopAPIServer", apiserverPID)
	}
	if _, err := cp.Client().CoreV1().ConfigMaps("default").Get(ctx, "survivor", metav1.GetOptions{}); err == nil {
		t.Errorf("get configmap with the apiserver stopped: no error")
	}
	began = time.Now()
	if err := cp.StartAPIServer(ctx); err != nil {
		t.Fatalf("start apiserver: %v", err)
	}
	t.Logf("apiserver restarted in %v", time.Since(began))
	checkConfigMap(t, cp.Client(), "v")

	pids := cp.pids()
	if len(pids) != 2 {
		t.Fatalf("pids %v, want etcd and kube-apiserver", pids)
	}
	stopBegan = time.Now()
	if err := cp.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	t.Logf("control plane stopped in %v", time.Since(stopBegan))
	for _, pid := range pids {
		if !gone(pid) {
			t.Errorf("pid %d (or its process group) still there after Stop", pid)
		}
	}
	if _, err := os.Stat(cp.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("work dir %s after Stop: %v, want it removed", cp.Dir, err)
	}
	if strays := processesMentioning(t, tmp); len(strays) > 0 {
		t.Errorf("processes still mention %s: %v", tmp, strays)
	}
	if err := cp.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

// TestOwnServingCert runs with the serving certificate the test bed makes
// when the apiserver's own one does not verify for 127.0.0.1.
func TestOwnServingCert(t *testing.T) {
	cp := StartT(t, Options{ownServingCert: true, Users: []User{}})
	if _, err := os.Stat(filepath.Join(cp.Dir, "apiserver-certs", "apiserver.crt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("apiserver generated its own certificate after all: %v", err)
	}
	if _, err := cp.Kubectl(t.Context(), "get", "ns", "default"); err != nil {
		t.Error(err)
	}
}

// TestStartFailureCleansUp makes the apiserver refuse its flags and checks
// that Start reports why and leaves no process or directory behind.
func TestStartFailureCleansUp(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real etcd")
	}
	bin, err := ToolsDir(t.Context())
	if err != nil {
		t.Fatalf("tools: %v", err)
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)

	cp, err := Start(t.Context(), Options{BinDir: bin, ExtraAPIServerArgs: []string{"--no-such-flag"}, Logf: t.Logf})
	if err == nil {
		cp.Stop()
		t.Fatal("Start with a bad apiserver flag: no error")
	}
	t.Logf("Start error (expected): %v", err)
	if !strings.Contains(err.Error(), "no-such-flag") {
		t.Errorf("error does not carry the apiserver's complaint: %v", err)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) > 0 {
		t.Errorf("left in TMPDIR: %v", entries)
	}
	if strays := processesMentioning(t, tmp); len(strays) > 0 {
		t.Errorf("processes still mention %s: %v", tmp, strays)
	}
}

func checkConfigMap(t *testing.T, client kubernetes.Interface, want string) {
	t.Helper()
	got, err := client.CoreV1().ConfigMaps("default").Get(t.Context(), "survivor", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get configmap: %v", err)
	}
	if got.Data["k"] != want {
		t.Errorf("configmap data %v, want k=%s", got.Data, want)
	}
}

// checkComponentUser checks that user is who the apiserver sees, both
// through its kubeconfig (with the real kubectl) and through RESTConfigFor.
func checkComponentUser(t *testing.T, cp *ControlPlane, user string) {
	t.Helper()
	kubeconfig, err := cp.Kubeconfig(user)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), filepath.Join(cp.BinDir, "kubectl"),
		"--kubeconfig="+kubeconfig, "--cache-dir="+filepath.Join(cp.Dir, "kubectl-cache"),
		"auth", "whoami", "-o", "json")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl auth whoami as %s: %v", user, err)
	}
	var review authenticationv1.SelfSubjectReview
	if err := json.Unmarshal(out, &review); err != nil {
		t.Fatalf("kubectl auth whoami: %v\n%s", err, out)
	}
	if got := review.Status.UserInfo; got.Username != user || !slices.Contains(got.Groups, "system:masters") {
		t.Errorf("kubectl as %s is %q in %v, want %q in system:masters", user, got.Username, got.Groups, user)
	}

	cfg, err := cp.RESTConfigFor(user)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := client.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("self subject review as %s: %v", user, err)
	}
	if got := res.Status.UserInfo.Username; got != user {
		t.Errorf("client-go as %s is %q", user, got)
	}
}

func firstColumn(table string) []string {
	var col []string
	for line := range strings.Lines(table) {
		if f := strings.Fields(line); len(f) > 0 {
			col = append(col, f[0])
		}
	}
	return col
}

// gone reports whether neither the process nor its process group exists.
func gone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) && errors.Is(syscall.Kill(-pid, 0), syscall.ESRCH)
}

// processesMentioning lists the command lines in /proc that contain s.
func processesMentioning(t *testing.T, s string) []string {
	t.Helper()
	paths, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // gone meanwhile
		}
		if cmdline := strings.ReplaceAll(string(b), "\x00", " "); strings.Contains(cmdline, s) {
			found = append(found, p+": "+cmdline)
		}
	}
	return found
}

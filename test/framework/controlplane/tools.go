package controlplane

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

const (
	// modulePath identifies the repository root by its go.mod.
	modulePath = "github.com/groundcloud/groundcloud"

	// EnvRepo overrides the search for the repository root.
	EnvRepo = "GROUNDCLOUD_REPO"
	// EnvToolsBin names a directory holding already built kube-apiserver,
	// kubectl and etcd; ToolsDir then builds nothing.
	EnvToolsBin = "GROUNDCLOUD_TOOLS_BIN"
)

// toolNames are the binaries a bin directory must hold.
var toolNames = []string{"etcd", "kube-apiserver", "kubectl"}

// ToolsDir returns a directory holding kube-apiserver, kubectl and etcd. It
// honours $GROUNDCLOUD_TOOLS_BIN; otherwise it runs <repo>/hack/tools/build.sh,
// which builds the pinned tools once (minutes) and afterwards only prints
// their directory. Build progress goes to stderr. The script serialises
// concurrent callers (test binaries of several packages) with a file lock.
// A cold build takes minutes: give go test a -timeout to match.
func ToolsDir(ctx context.Context) (string, error) {
	if dir := os.Getenv(EnvToolsBin); dir != "" {
		if err := checkTools(dir); err != nil {
			return "", fmt.Errorf("$%s: %w", EnvToolsBin, err)
		}
		return dir, nil
	}
	repo, err := RepoRoot()
	if err != nil {
		return "", err
	}
	dir, err := runBuildScript(ctx, filepath.Join(repo, "hack", "tools", "build.sh"))
	if err != nil {
		return "", err
	}
	if err := checkTools(dir); err != nil {
		return "", fmt.Errorf("after build: %w", err)
	}
	return dir, nil
}

// RepoRoot returns $GROUNDCLOUD_REPO or the nearest directory at or above the
// working directory whose go.mod declares the groundcloud module.
func RepoRoot() (string, error) {
	if dir := os.Getenv(EnvRepo); dir != "" {
		return dir, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find repository: %w", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if goModDeclares(filepath.Join(dir, "go.mod"), modulePath) {
			return dir, nil
		}
		if dir == filepath.Dir(dir) {
			return "", fmt.Errorf("find repository: no go.mod of module %s at or above %s (set $%s)", modulePath, wd, EnvRepo)
		}
	}
}

// goModDeclares reports whether the go.mod at path declares module mod.
func goModDeclares(path, mod string) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "module" {
			return strings.Trim(f[1], "\"`") == mod
		}
	}
	return false
}

func runBuildScript(ctx context.Context, script string, args ...string) (string, error) {
	var stdout bytes.Buffer
	stderr := &tailBuffer{max: 8 << 10}
	cmd := exec.CommandContext(ctx, "bash", append([]string{script}, args...)...)
	cmd.Stdout = &stdout
	cmd.Stderr = io.MultiWriter(os.Stderr, stderr)
	// The script's go build must go with it when ctx ends, so the script
	// runs in a process group of its own and cancelling kills the group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build tools with %s: %w\n%s", script, err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	dir := strings.TrimSpace(lines[len(lines)-1])
	if dir == "" {
		return "", fmt.Errorf("build tools with %s: no directory printed", script)
	}
	return dir, nil
}

func checkTools(dir string) error { return checkToolsNamed(dir, toolNames) }

// toolNames are the binaries o needs.
func (o Options) toolNames() []string {
	names := slices.Clone(toolNames)
	if o.ControllerManager != nil {
		names = append(names, "kube-controller-manager")
	}
	if o.Scheduler {
		names = append(names, "kube-scheduler")
	}
	return names
}

func checkToolsNamed(dir string, names []string) error {
	var errs []error
	for _, name := range names {
		fi, err := os.Stat(filepath.Join(dir, name))
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("tool %s: %w", name, err))
		case fi.IsDir() || fi.Mode().Perm()&0o111 == 0:
			errs = append(errs, fmt.Errorf("tool %s in %s is not an executable file", name, dir))
		}
	}
	return errors.Join(errs...)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = b.buf[over:]
	}
	return len(p), nil
}

func (b *tailBuffer) String() string { return string(b.buf) }

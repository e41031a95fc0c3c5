package clustertest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/groundcloud/groundcloud/test/framework/realcluster"
	"github.com/groundcloud/groundcloud/test/images/echo"
)

// TestSandbox runs the README's first command as a user would, with
// --bgp: `up` prints a curl line that works from this machine's shell
// (checkSandboxL2) and lines about the BGP example that are true
// (checkSandboxBGP); a second `up` says one is running; Ctrl-C leaves the
// machine as it was (namespaces, links, addresses, routes, ruleset,
// sysctls, mounts, processes, cgroups, the router's directory). Then
// `up --bmc` comes up, its printed BMC commands power a worker off and on
// as the controller manager sees (checkSandboxBMC), it crashes, and `down`
// leaves the machine as it was.
//
// One run with --bgp covers both examples at the cost of one more
// load-balancer host and the router: the L2 example is the same with or
// without --bgp (pool "default", announced on the link by one of the
// hosts). The plain `up` is covered too: every `up` prints its curl line
// only once the address answers this shell.
func TestSandbox(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: runs the whole sandbox")
	}
	dir := t.TempDir()
	t.Cleanup(func() { _ = exec.Command(sandboxBinary, "down", "--dir", dir).Run() })
	before := hostState(t)

	up, summary := startSandbox(t, dir, "--bgp")
	checkSandboxL2(t, summary)
	routerDir := checkSandboxBGP(t, summary)

	second := exec.Command(sandboxBinary, "up", "--dir", t.TempDir())
	out, err := second.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "already running") {
		t.Errorf("second up: %v\n%s", err, out)
	}

	if err := up.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	waitExit(t, up, 0)
	expectNothingLeft(t, dir)
	if _, err := os.Stat(routerDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the router's directory %s is left (%v)", routerDir, err)
	}
	expectAsBefore(t, before)

	// With a BMC (--bmc): its printed commands work. Then a crash leaves
	// namespaces, the link and processes (the BMC's too); down removes
	// them.
	up, summary = startSandbox(t, dir, "--bmc")
	checkSandboxBMC(t, summary)
	if err := up.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = up.Wait()
	if out, err := exec.Command("ip", "netns", "list").Output(); err != nil || !bytes.Contains(out, []byte("gcsandbox-")) {
		t.Logf("after the crash, namespaces: %s", out)
	}
	down, err := exec.Command(sandboxBinary, "down", "--dir", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("down: %v\n%s", err, down)
	}
	expectNothingLeft(t, dir)
	expectAsBefore(t, before)
}

// checkSandboxL2: the summary's curl line works from this shell, answered
// by the example's Pods on both workers, which see the shell's own address.
func checkSandboxL2(t *testing.T, summary []string) {
	t.Helper()
	url := summaryMatch(t, summary, regexp.MustCompile(`^\s+curl (http://\S+)$`))[1]
	nodes := map[string]bool{}
	// A new connection per request, as separate curl runs make; each
	// remembers its own address, which the Pod must see (passthrough
	// forwarding, externalTrafficPolicy Local).
	var mine string
	dialer := &net.Dialer{}
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := dialer.DialContext(ctx, network, addr)
			if err == nil {
				mine = conn.LocalAddr().String()
			}
			return conn, err
		}}}
	// Until both workers answered: with externalTrafficPolicy Local a
	// node gets flows once its healthCheckNodePort reports the Pod, which
	// the agents learn at their next probe (every 2 s).
	deadline := time.Now().Add(time.Minute)
	for i := 0; i < 30 || (len(nodes) < 2 && time.Now().Before(deadline)); i++ {
		if i >= 30 {
			time.Sleep(200 * time.Millisecond)
		}
		resp, err := client.Get(url)
		if err != nil {
			t.Fatalf("curl %s: %v", url, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if said, err := echo.Parse(string(body)); err == nil && strings.HasPrefix(said.Pod, "hello-") {
			nodes[said.Node] = true
			if seen := said.Client.String(); seen != mine {
				t.Errorf("the Pod saw this shell as %s, want its own address %s", seen, mine)
			}
		}
	}
	if len(nodes) != 2 {
		t.Errorf("requests through %s reached Pods on %v, want Pods on both workers", url, nodes)
	}
}

// sandboxNetns picks the sandbox's named namespaces among those of the
// machine (others come and go with other tests).
func sandboxNetns(name string) bool { return strings.HasPrefix(name, "gcsandbox-") }

// hostState reads the machine's state while no test-bed cluster runs.
func hostState(t *testing.T) realcluster.HostState {
	t.Helper()
	var s realcluster.HostState
	err := realcluster.WithHostLock(t.Context(), func() (err error) {
		s, err = realcluster.TakeHostState(t.Context(), sandboxNetns)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// expectAsBefore compares the machine's state with before.
func expectAsBefore(t *testing.T, before realcluster.HostState) {
	t.Helper()
	for _, d := range before.Diff(hostState(t)) {
		t.Errorf("the machine differs: %s", d)
	}
}

// startSandbox starts `up` with args and returns its summary: its lines
// other than progress ("==> ...") up to "Press Ctrl-C".
func startSandbox(t *testing.T, dir string, args ...string) (*exec.Cmd, []string) {
	t.Helper()
	cmd := exec.Command(sandboxBinary, append([]string{"up", "--dir", dir}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			lines <- s.Text()
		}
		close(lines)
	}()
	var summary []string
	timeout := time.After(10 * time.Minute) // a first run builds the tools
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				_ = cmd.Wait()
				t.Fatalf("sandbox exited before it was up")
			}
			t.Log(line)
			if !strings.HasPrefix(line, "==> ") {
				summary = append(summary, line)
			}
			if strings.HasPrefix(line, "Press Ctrl-C") {
				go func() {
					for range lines {
					}
				}()
				return cmd, summary
			}
		case <-timeout:
			_ = cmd.Process.Kill()
			t.Fatal("sandbox not up in 10 minutes")
		}
	}
}

// summaryMatch returns the submatches of the first line of the summary
// that re matches, or fails the test.
func summaryMatch(t *testing.T, summary []string, re *regexp.Regexp) []string {
	t.Helper()
	for _, l := range summary {
		if m := re.FindStringSubmatch(l); m != nil {
			return m
		}
	}
	t.Fatalf("no line of the summary matches %s", re)
	return nil
}

func waitExit(t *testing.T, cmd *exec.Cmd, want int) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatal("sandbox did not stop within 2 minutes of Ctrl-C")
	}
	if got := cmd.ProcessState.ExitCode(); got != want {
		t.Errorf("sandbox exit status %d, want %d", got, want)
	}
}

// expectNothingLeft checks the machine for anything of the sandbox's.
func expectNothingLeft(t *testing.T, dir string) {
	t.Helper()
	ctx := context.Background()
	if out, _ := exec.CommandContext(ctx, "ip", "netns", "list").Output(); bytes.Contains(out, []byte("gcsandbox")) {
		t.Errorf("namespaces left:\n%s", out)
	}
	if out, _ := exec.CommandContext(ctx, "ip", "-br", "link").Output(); bytes.Contains(out, []byte("gcsandbox")) {
		t.Errorf("links left:\n%s", out)
	}
	if out, _ := exec.CommandContext(ctx, "nft", "list", "tables").Output(); bytes.Contains(out, []byte("groundcloud")) {
		t.Errorf("nftables tables left in the root namespace:\n%s", out)
	}
	if left, _ := filepath.Glob("/sys/fs/cgroup/*/groundcloud.gcsandbox"); len(left) > 0 {
		t.Errorf("cgroups left: %v", left)
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if bytes.Contains(cmdline, []byte(dir)) {
			t.Errorf("process left: %d %s", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
		}
	}
}

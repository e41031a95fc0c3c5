package controlplane

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// envOrphanHelper makes the test binary act as a parent that starts a
// control plane, prints its children's pids and waits to be killed.
const envOrphanHelper = "GROUNDCLOUD_TESTBED_ORPHAN_HELPER"

// TestChildrenDieWithParent kills a parent holding a control plane with
// SIGKILL, so no Stop runs, and checks that etcd and kube-apiserver die too.
func TestChildrenDieWithParent(t *testing.T) {
	if os.Getenv(envOrphanHelper) != "" {
		orphanHelper(t)
		return
	}
	if testing.Short() {
		t.Skip("starts a real control plane")
	}
	bin, err := ToolsDir(t.Context())
	if err != nil {
		t.Fatalf("tools: %v", err)
	}
	tmp := t.TempDir() // the killed parent cannot remove its work dir
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestChildrenDieWithParent$", "-test.v")
	cmd.Env = append(os.Environ(), envOrphanHelper+"=1", EnvToolsBin+"="+bin, "TMPDIR="+tmp)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	var pids []int
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "PIDS "); ok {
			for f := range strings.FieldsSeq(rest) {
				pid, err := strconv.Atoi(f)
				if err != nil {
					t.Fatal(err)
				}
				pids = append(pids, pid)
			}
			break
		}
	}
	if len(pids) != 2 {
		t.Fatalf("helper reported pids %v, want etcd and kube-apiserver", pids)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for !gone(pid) {
			// Orphans are reparented and reaped by init; give it a moment.
			if time.Now().After(deadline) {
				t.Fatalf("pid %d outlived its SIGKILLed parent", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if strays := processesMentioning(t, tmp); len(strays) > 0 {
		t.Errorf("processes still mention %s: %v", tmp, strays)
	}
}

func orphanHelper(t *testing.T) {
	cp := StartT(t, Options{})
	fmt.Printf("\nPIDS %s\n", strings.Trim(fmt.Sprint(cp.pids()), "[]"))
	os.Stdout.Sync()
	// Wait to be killed; a stopped control plane would prove nothing.
	time.Sleep(time.Hour)
}

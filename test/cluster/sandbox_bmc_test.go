package clustertest

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// What checkSandboxBMC reads in the summary of `up --bmc`.
var (
	bmcOffRE = regexp.MustCompile(`^\s+(curl -sk .*"ResetType":"ForceOff".*)$`)
	bmcOnRE  = regexp.MustCompile(`^\s+(curl -sk .*"ResetType":"On".*)$`)
	bmcNode  = regexp.MustCompile(`Power (node-\d+) off as its BMC would`)
)

// checkSandboxBMC checks what the summary of `up --bmc` says, with the
// commands it prints, as a user types them: the ForceOff curl powers the
// named worker off through its BMC, and the controller manager sees it
// (the Node's BMCReachable condition says PowerState Off, as the printed
// kubectl describe shows); the On curl powers it on again (PowerState On),
// and the worker ends Ready and without the out-of-service taint.
//
// When the controller manager's leader runs on that worker it goes down
// with it: the other replica takes the Lease over (15 s) and acts on the
// cloud-config its kubelet has given it, which may lag the sandbox's
// change by a minute or more (a mounted Secret); the waits allow for that,
// and for the taint the worker may get meanwhile (it is then removed).
func checkSandboxBMC(t *testing.T, summary []string) {
	t.Helper()
	printed := strings.Join(summary, "\n")
	m := bmcNode.FindStringSubmatch(printed)
	if m == nil {
		t.Fatalf("the summary names no worker to power off:\n%s", printed)
	}
	node := m[1]
	kubectl := func(args ...string) string {
		cmd := exec.CommandContext(t.Context(), summaryMatch(t, summary, kubectlRE)[1], args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+summaryMatch(t, summary, kubeconfRE)[1])
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	bmcSays := func(state string) {
		t.Helper()
		var said string
		// The emulator applies a power action 1 to 11 s after the request;
		// the controller manager polls every 2 s.
		for deadline := time.Now().Add(4 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
			said = kubectl("get", "node", node, "-o", `jsonpath={.status.conditions[?(@.type=="BMCReachable")].message}`)
			if strings.Contains(said, "PowerState "+state) {
				return
			}
		}
		t.Fatalf("%s's BMCReachable condition says %q, want PowerState %s", node, said, state)
	}
	run := func(line string) {
		t.Helper()
		out, err := exec.CommandContext(t.Context(), "sh", "-c", line).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
	}
	bmcSays("On")
	run(summaryMatch(t, summary, bmcOffRE)[1])
	bmcSays("Off")
	run(summaryMatch(t, summary, bmcOnRE)[1])
	bmcSays("On")
	var ready, taints string
	for deadline := time.Now().Add(4 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		ready = kubectl("get", "node", node, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		taints = kubectl("get", "node", node, "-o", "jsonpath={.spec.taints[*].key}")
		if ready == "True" && !strings.Contains(taints, "out-of-service") {
			return
		}
	}
	t.Errorf("%s powered on again: Ready %q, taints %q; want Ready without the out-of-service taint", node, ready, taints)
}

package conformance

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

func TestReadJUnit(t *testing.T) {
	doc := `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="4" disabled="0" errors="0" failures="1" time="100">
  <testsuite name="Kubernetes e2e suite" tests="4">
    <testcase name="[SynchronizedBeforeSuite]" classname="Kubernetes e2e suite" status="passed" time="5"></testcase>
    <testcase name="[sig-network] LoadBalancers a" classname="Kubernetes e2e suite" status="passed" time="30.5"></testcase>
    <testcase name="[sig-network] LoadBalancers b" classname="Kubernetes e2e suite" status="failed" time="60">
      <failure message="timed out" type="failed">[FAILED] timed out waiting</failure>
    </testcase>
    <testcase name="[sig-network] LoadBalancers c" classname="Kubernetes e2e suite" status="skipped" time="0">
      <skipped message="skipped - Test requires multiple schedulable nodes"></skipped>
    </testcase>
  </testsuite>
</testsuites>`
	path := filepath.Join(t.TempDir(), "junit_01.xml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadJUnit(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []Result{
		{Name: "[sig-network] LoadBalancers a", Seconds: 30.5, State: "passed"},
		{Name: "[sig-network] LoadBalancers b", Seconds: 60, State: "failed", Message: "timed out"},
		{Name: "[sig-network] LoadBalancers c", State: "skipped", Message: "skipped - Test requires multiple schedulable nodes"},
	}
	if len(got) != len(want) {
		t.Fatalf("ReadJUnit = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("result %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestFocused(t *testing.T) {
	results := []Result{
		{Name: "[It] [sig-network] LoadBalancers [Feature:LoadBalancer] a", State: "passed"},
		{Name: "[It] [sig-apps] CronJob b", State: "skipped", Message: "skipped"},
		{Name: "[It] [sig-network] LoadBalancers ExternalTrafficPolicy: Local [Feature:LoadBalancer] c", State: "skipped", Message: "skipped - reason"},
	}
	got := Focused(results, regexp.MustCompile(`\[sig-network\] LoadBalancers`))
	if len(got) != 2 || got[0].Name != results[0].Name || got[1].Name != results[2].Name {
		t.Errorf("Focused = %+v, want the two LoadBalancers specs", got)
	}
}

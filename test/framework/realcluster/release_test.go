package realcluster

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/groundcloud/groundcloud/test/framework/controlplane"
	"github.com/groundcloud/groundcloud/test/framework/manifests"
)

func TestAgentHostLabel(t *testing.T) {
	daemonSet := func(name string, sel string) string {
		return `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: ` + name + `
  namespace: kube-system
spec:
  template:
    spec:
      nodeSelector:
` + sel
	}
	for _, tc := range []struct {
		name, yaml, want string
		wantErr          bool
	}{
		{name: "node-restricted key", yaml: daemonSet("groundcloud-agent", "        kubernetes.io/os: linux\n        node-restriction.kubernetes.io/groundcloud-load-balancer: \"true\"\n"),
			want: "node-restriction.kubernetes.io/groundcloud-load-balancer"},
		{name: "former key", yaml: daemonSet("groundcloud-agent", "        groundcloud.io/load-balancer: \"true\"\n        kubernetes.io/os: linux\n"),
			want: "groundcloud.io/load-balancer"},
		{name: "os only", yaml: daemonSet("groundcloud-agent", "        kubernetes.io/os: linux\n"), wantErr: true},
		{name: "no agent", yaml: daemonSet("groundcloud-router", "        kubernetes.io/os: linux\n"), wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := manifests.Parse([]byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			got, err := agentHostLabel(objs)
			if (err != nil) != tc.wantErr {
				t.Fatalf("agentHostLabel: %q, %v; want error %v", got, err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("agentHostLabel = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestExportCommitMissing(t *testing.T) {
	repo, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	err = ExportCommit(t.Context(), repo, strings.Repeat("0", 40), filepath.Join(t.TempDir(), "tree"))
	if err == nil || !strings.Contains(err.Error(), "is not in the clone") {
		t.Errorf("ExportCommit of a missing commit: %v, want an error saying it is not in the clone", err)
	}
}

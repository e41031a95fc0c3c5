package manifests

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/groundcloud/groundcloud/internal/annotation"
)

// formerHostLabel placed the agent before annotation.LoadBalancerHostLabel;
// a kubelet may set it.
const formerHostLabel = "groundcloud.io/load-balancer"

// TestChartAgentHostLabel: by default the agents run on the Nodes an
// administrator labelled, and the notes say how to label one; the values
// docs/install.md#upgrading gives to keep the former label for a while
// select it alone, and the notes warn that a node may label itself into
// that selector.
func TestChartAgentHostLabel(t *testing.T) {
	h := newHelm(t)
	former, err := filepath.Abs("testdata/chart-values-former-host-label.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const warning = "WARNING: agent.nodeSelector has no key under node-restriction.kubernetes.io/"
	tests := []struct {
		name         string
		values       []string
		wantSelector map[string]string
		wantNotes    string
		warns        bool
	}{
		{
			name:         "defaults",
			wantSelector: map[string]string{annotation.LoadBalancerHostLabel: "true", corev1.LabelOSStable: "linux"},
			wantNotes:    "kubectl label node <load-balancer host> " + annotation.LoadBalancerHostLabel + "=true\n",
		},
		{
			name:         "the former label, while upgrading",
			values:       []string{former},
			wantSelector: map[string]string{formerHostLabel: "true", corev1.LabelOSStable: "linux"},
			wantNotes:    "kubectl label node <load-balancer host> " + formerHostLabel + "=true\n",
			warns:        true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Release{Name: releaseName, Namespace: "kube-system", ValuesFiles: tt.values}
			objs, err := h.Render(t.Context(), chartDir(t), r)
			if err != nil {
				t.Fatal(err)
			}
			ds := object[appsv1.DaemonSet](t, objs, "DaemonSet", "groundcloud-agent")
			if diff := cmp.Diff(tt.wantSelector, ds.Spec.Template.Spec.NodeSelector); diff != "" {
				t.Errorf("nodeSelector (-want +got):\n%s", diff)
			}
			notes := chartNotes(t, h, r)
			if !strings.Contains(notes, tt.wantNotes) {
				t.Errorf("notes lack %q:\n%s", tt.wantNotes, notes)
			}
			if got := strings.Contains(notes, warning); got != tt.warns {
				t.Errorf("notes warn of a selector kubelets may set: %v, want %v:\n%s", got, tt.warns, notes)
			}
		})
	}
}

// chartNotes returns the notes `helm install` prints for release r.
func chartNotes(t *testing.T, h Helm, r Release) string {
	t.Helper()
	args := append([]string{"install", "--dry-run=client"}, r.args()...)
	out, err := h.Run(t.Context(), append(args, chartDir(t))...)
	if err != nil {
		t.Fatalf("helm install --dry-run=client: %v\n%s", err, out)
	}
	_, notes, ok := strings.Cut(string(out), "\nNOTES:\n")
	if !ok {
		t.Fatalf("helm install --dry-run=client printed no notes:\n%s", out)
	}
	return notes
}

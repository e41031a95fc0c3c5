package manifests

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Helm runs one helm binary with its cache, configuration and data under
// Home, so that it reads and writes nothing of the user's.
type Helm struct {
	Bin, Home string
}

// Release is how a chart is rendered or installed: `helm template|install
// Name chart --namespace Namespace --values ValuesFiles... --set Set...`.
type Release struct {
	Name, Namespace string
	ValuesFiles     []string
	Set             []string
}

func (r Release) args() []string {
	args := []string{r.Name}
	if r.Namespace != "" {
		args = append(args, "--namespace", r.Namespace)
	}
	for _, f := range r.ValuesFiles {
		args = append(args, "--values", f)
	}
	for _, s := range r.Set {
		args = append(args, "--set", s)
	}
	return args
}

// Render renders a chart as `helm install` would install it, CRDs
// included, and returns the objects in helm's order.
func (h Helm) Render(ctx context.Context, chart string, r Release) ([]*unstructured.Unstructured, error) {
	args := append([]string{"template"}, r.args()...)
	out, err := h.Run(ctx, append(args, chart, "--include-crds")...)
	if err != nil {
		return nil, err
	}
	objs, err := Parse(out)
	if err != nil {
		return nil, fmt.Errorf("helm template %s: %w", chart, err)
	}
	return objs, nil
}

// Install runs `helm upgrade --install` of chart against the cluster of
// kubeconfig, and waits for nothing.
func (h Helm) Install(ctx context.Context, kubeconfig, chart string, r Release) ([]byte, error) {
	args := append([]string{"upgrade", "--install", "--kubeconfig", kubeconfig}, r.args()...)
	return h.Run(ctx, append(args, chart)...)
}

// Run runs helm and returns its stdout; a failure's error carries stderr.
func (h Helm) Run(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, h.Bin, args...)
	cmd.Env = append(cmd.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(h.Home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(h.Home, "config"),
		"HELM_DATA_HOME="+filepath.Join(h.Home, "data"),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("helm %v: %w: %s", args, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.Bytes(), nil
}

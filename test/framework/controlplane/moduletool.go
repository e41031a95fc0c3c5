package controlplane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// Module tools: small pinned modules beside the control-plane tools, each
// building one binary (hack/tools/<name>).
const (
	// ToolHelm is the Helm CLI (hack/tools/helm).
	ToolHelm = "helm"
	// ToolPromcheck checks rule files and dashboards with Prometheus'
	// parsers (hack/tools/promcheck).
	ToolPromcheck = "promcheck"
)

// ModuleTool returns the path of the binary of the pinned module
// hack/tools/<name>, which <repo>/hack/tools/build-module.sh builds once
// into $GROUNDCLOUD_TOOLS_DIR (seconds to minutes the first time; it then
// only prints the path). Concurrent callers wait on the script's lock.
func ModuleTool(ctx context.Context, name string) (string, error) {
	repo, err := RepoRoot()
	if err != nil {
		return "", err
	}
	bin, err := runBuildScript(ctx, filepath.Join(repo, "hack", "tools", "build-module.sh"), name)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(bin)
	if err != nil {
		return "", fmt.Errorf("tool %s: %w", name, err)
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("tool %s: %s is not an executable file", name, bin)
	}
	return bin, nil
}

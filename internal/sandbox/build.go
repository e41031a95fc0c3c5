package sandbox

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"

	"github.com/groundcloud/groundcloud/internal/testbed"
)

// BuildBinaries builds our programs (`go build ./cmd/...` in the checkout
// this runs in) into dir.
func BuildBinaries(ctx context.Context, dir string) (Binaries, error) {
	root, err := testbed.RepoRoot()
	if err != nil {
		return Binaries{}, err
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", dir+"/", "./cmd/...")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return Binaries{}, fmt.Errorf("build groundcloud binaries: %w\n%s", err, out)
	}
	return Binaries{
		ControllerManager: filepath.Join(dir, "groundcloud-controller-manager"),
		Agent:             filepath.Join(dir, "groundcloud-agent"),
		NodeSim:           filepath.Join(dir, "groundcloud-nodesim"),
	}, nil
}

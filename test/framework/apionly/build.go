package apionly

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/groundcloud/groundcloud/test/framework/controlplane"
)

// BuildBinaries builds our programs (`make build`: ./cmd/... in the
// checkout this runs in) and the simulated node's data path
// (test/images/nodesim/groundcloud-nodesim) into dir, as our Dockerfiles build them (static,
// trimmed paths), so that the binaries the tests run on hosts are those of
// the images, and the two builds share their compiled packages.
func BuildBinaries(ctx context.Context, dir string) (Binaries, error) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return Binaries{}, err
	}
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", dir+"/", "./cmd/...", "./test/images/nodesim/groundcloud-nodesim")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
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

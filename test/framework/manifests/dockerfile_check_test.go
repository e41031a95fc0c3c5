package manifests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/groundcloud/groundcloud/test/framework/controlplane"
	"github.com/groundcloud/groundcloud/test/framework/imagebuild"
)

// TestDockerfileProblems: the image test notices each way the agent's
// Dockerfile could drift from what make build builds.
func TestDockerfileProblems(t *testing.T) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "deploy", "images", "groundcloud-agent", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	good := string(data)
	const bin, pkg = "groundcloud-agent", "./cmd/groundcloud-agent"
	want := shipped[bin]
	tests := []struct {
		name     string
		old, new string // replaced in the real Dockerfile
		problem  string // "" for none
	}{
		{name: "as it is"},
		{name: "another package", old: " ./cmd/groundcloud-agent", new: " ./test/images/nodesim/groundcloud-nodesim", problem: `go build ["./test/images/nodesim/groundcloud-nodesim"], want exactly ./cmd/groundcloud-agent`},
		{name: "two packages", old: " ./cmd/groundcloud-agent", new: " ./cmd/groundcloud-agent ./test/images/nodesim/groundcloud-nodesim", problem: "want exactly ./cmd/groundcloud-agent"},
		{name: "everything", old: " ./cmd/groundcloud-agent", new: " ./cmd/...", problem: "want exactly"},
		{name: "no trimpath", old: "-trimpath ", new: "", problem: "without -trimpath"},
		{name: "cgo", old: "ENV CGO_ENABLED=0", new: "ENV CGO_ENABLED=1", problem: "CGO_ENABLED=0 is set neither"},
		{name: "cgo off in the RUN", old: "ENV CGO_ENABLED=0\nRUN go build", new: "RUN CGO_ENABLED=0 go build"},
		{name: "old Go", old: "FROM golang:1.26", new: "FROM golang:1.25", problem: "want golang:1.26"},
		{name: "sources before modules", old: "COPY go.mod go.sum ./\n", new: "COPY . .\n", problem: "go mod download after COPY"},
		{name: "other base", old: "FROM debian:bookworm-slim", new: "FROM ubuntu:24.04", problem: "final stage FROM ubuntu:24.04"},
		{name: "extra package", old: "nftables \\", new: "nftables iproute2 \\", problem: `installs ["nftables" "iproute2"]`},
		{name: "wrong entrypoint", old: `ENTRYPOINT ["/usr/local/bin/groundcloud-agent"]`, new: `ENTRYPOINT ["/bin/sh"]`, problem: "ENTRYPOINT"},
		{name: "continued go build", old: "-trimpath -ldflags", new: "-trimpath \\\n    -ldflags"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			df := good
			if tt.old != "" {
				if !strings.Contains(df, tt.old) {
					t.Fatalf("the Dockerfile has no %q any more; update the test", tt.old)
				}
				df = strings.Replace(df, tt.old, tt.new, 1)
			}
			got := dockerfileProblems(imagebuild.ParseDockerfile(df), bin, pkg, "1.26", want)
			if tt.problem == "" {
				if diff := cmp.Diff([]string(nil), got); diff != "" {
					t.Errorf("problems (-want +got):\n%s", diff)
				}
				return
			}
			if !strings.Contains(strings.Join(got, "\n"), tt.problem) {
				t.Errorf("problems %q lack %q", got, tt.problem)
			}
		})
	}
}

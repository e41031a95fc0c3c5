package imagebuild

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestShellFields(t *testing.T) {
	got := ShellFields(`CGO_ENABLED=0 go build -ldflags="-s -w" -o '/out/a b' ./cmd/x && echo "a\"b";ls`)
	want := []string{"CGO_ENABLED=0", "go", "build", "-ldflags=-s -w", "-o", "/out/a b", "./cmd/x", "&&", "echo", `a"b`, ";", "ls"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ShellFields (-want +got):\n%s", diff)
	}
}

func TestGoBuilds(t *testing.T) {
	got := GoBuilds(`go mod download && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/x ./cmd/x`)
	want := []GoBuild{{
		Env:      map[string]string{"CGO_ENABLED": "0"},
		Flags:    []string{"-trimpath", "-ldflags=-s -w", "-o=/out/x"},
		Output:   "/out/x",
		Packages: []string{"./cmd/x"},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GoBuilds (-want +got):\n%s", diff)
	}
}

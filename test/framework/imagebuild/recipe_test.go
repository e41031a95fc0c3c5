package imagebuild

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const goodDockerfile = `FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ENV CGO_ENABLED=0
RUN go build -trimpath -ldflags="-s -w" -o /out/x ./cmd/x

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends nftables \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/x /usr/local/bin/x
USER 0:0
ENTRYPOINT ["/usr/local/bin/x", "--flag"]
`

func TestRecipe(t *testing.T) {
	got, err := recipeOf(ParseDockerfile(goodDockerfile))
	if err != nil {
		t.Fatal(err)
	}
	want := Recipe{
		Build: GoBuild{
			Env:      map[string]string{"CGO_ENABLED": "0"},
			Flags:    []string{"-trimpath", "-ldflags=-s -w", "-o=/out/x"},
			Output:   "/out/x",
			Packages: []string{"./cmd/x"},
		},
		Base:       "debian:bookworm-slim",
		Packages:   []string{"nftables"},
		Copies:     []Copy{{Src: "/out/x", Dest: "/usr/local/bin/x"}},
		User:       "0:0",
		Entrypoint: []string{"/usr/local/bin/x", "--flag"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("recipe (-want +got):\n%s", diff)
	}
}

// TestRecipeRefuses: whatever the builder would not reproduce is an error
// naming it, never a different image.
func TestRecipeRefuses(t *testing.T) {
	tests := []struct {
		name, old, new, problem string
	}{
		{name: "another command", old: "rm -rf /var/lib/apt/lists/*", new: "curl -o /x http://example.com/x", problem: `command "curl -o /x http://example.com/x" not understood`},
		{name: "a file from the context", old: "COPY --from=build /out/x", new: "COPY ./x", problem: "want COPY --from=build"},
		{name: "shell entrypoint", old: `ENTRYPOINT ["/usr/local/bin/x", "--flag"]`, new: "ENTRYPOINT /usr/local/bin/x", problem: "want the exec form"},
		{name: "no entrypoint", old: `ENTRYPOINT ["/usr/local/bin/x", "--flag"]`, new: "", problem: "no ENTRYPOINT"},
		{name: "workdir", old: "USER 0:0", new: "WORKDIR /var", problem: "WORKDIR /var: not understood"},
		{name: "two builds", old: "RUN go mod download", new: "RUN go build ./cmd/y", problem: "2 go build commands"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(goodDockerfile, tt.old) {
				t.Fatalf("the Dockerfile has no %q", tt.old)
			}
			_, err := recipeOf(ParseDockerfile(strings.Replace(goodDockerfile, tt.old, tt.new, 1)))
			if err == nil || !strings.Contains(err.Error(), tt.problem) {
				t.Errorf("error %v, want one saying %q", err, tt.problem)
			}
		})
	}
}

// TestOurDockerfilesAreRecipes: every Dockerfile under deploy/images/ is
// one the local builder reproduces, with a base it knows and packages it
// can take from a Debian machine.
func TestOurDockerfilesAreRecipes(t *testing.T) {
	files, err := filepath.Glob("../../../deploy/images/*/Dockerfile")
	if err != nil || len(files) == 0 {
		t.Fatalf("no Dockerfiles found: %v", err)
	}
	for _, f := range files {
		r, err := ReadRecipe(f)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if _, ok := bases[r.Base]; !ok {
			t.Errorf("%s: base %s unknown to the builder", f, r.Base)
		}
		for _, p := range r.Packages {
			if _, ok := hostPackages[p]; !ok {
				t.Errorf("%s: package %s unknown to the builder", f, p)
			}
		}
		if len(r.Copies) != 1 || r.Copies[0].Dest != r.Entrypoint[0] {
			t.Errorf("%s: copies %v, entrypoint %v: want the built binary as the entrypoint", f, r.Copies, r.Entrypoint)
		}
	}
}

// TestCompileRefusesToMix: builds that would not be the same go build are
// refused before anything runs.
func TestCompileRefusesToMix(t *testing.T) {
	a := GoBuild{Env: map[string]string{"CGO_ENABLED": "0"}, Flags: []string{"-trimpath", "-o=/out/x"}, Output: "/out/x", Packages: []string{"./cmd/x"}}
	tests := []struct {
		name    string
		b       GoBuild
		problem string
	}{
		{"other environment", GoBuild{Env: map[string]string{}, Flags: []string{"-trimpath", "-o=/out/y"}, Output: "/out/y", Packages: []string{"./cmd/y"}}, "differ in environment or flags"},
		{"other flags", GoBuild{Env: map[string]string{"CGO_ENABLED": "0"}, Flags: []string{"-o=/out/y"}, Output: "/out/y", Packages: []string{"./cmd/y"}}, "differ in environment or flags"},
		{"renamed binary", GoBuild{Env: map[string]string{"CGO_ENABLED": "0"}, Flags: []string{"-trimpath", "-o=/out/z"}, Output: "/out/z", Packages: []string{"./cmd/y"}}, "named after its package"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Builder{Dir: t.TempDir(), Repo: t.TempDir()}.Compile(t.Context(), a, tt.b)
			if err == nil || !strings.Contains(err.Error(), tt.problem) {
				t.Errorf("error %v, want one saying %q", err, tt.problem)
			}
		})
	}
}

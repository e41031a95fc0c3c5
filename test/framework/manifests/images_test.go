package manifests

import (
	"encoding/json"
	"fmt"
	"go/build"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/groundcloud/groundcloud/test/framework/controlplane"
	"github.com/groundcloud/groundcloud/test/framework/imagebuild"
)

// shipped are the binaries we ship as container images, with the final
// stage each must have. The other binaries under cmd/ (nodesim, sandbox)
// are test tools.
var shipped = map[string]imageWant{
	"groundcloud-controller-manager": {base: "gcr.io/distroless/static-debian12:nonroot"},
	// knftables execs nft: the only package besides the base image.
	"groundcloud-agent": {base: "debian:bookworm-slim", packages: []string{"nftables"}},
	// Routes by netlink: nothing but the binary, as root.
	"groundcloud-router": {base: "gcr.io/distroless/static-debian12"},
}

type imageWant struct {
	base     string
	packages []string // apt-get install in the final stage, nothing else
}

// TestImagesBuildWhatTheMakefileBuilds: each Dockerfile builds exactly the
// package `make build` builds for its binary, the way DESIGN asks (static,
// trimmed paths, modules cached first, the Go of go.mod), and every shipped
// binary has one. Docker does not run here; this reads the files.
func TestImagesBuildWhatTheMakefileBuilds(t *testing.T) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	built := makefileBinaries(t, root)
	dockerfiles := findDockerfiles(t, root)
	for bin := range shipped {
		if _, ok := built[bin]; !ok {
			t.Errorf("we ship %s, but make build does not build it (builds %v)", bin, slices.Sorted(maps.Keys(built)))
		}
		if _, ok := dockerfiles[bin]; !ok {
			t.Errorf("we ship %s, but there is no deploy/images/%s/Dockerfile", bin, bin)
		}
	}
	goVersion := goDirective(t, filepath.Join(root, "go.mod"))
	for bin, file := range dockerfiles {
		t.Run(bin, func(t *testing.T) {
			if _, ok := built[bin]; !ok {
				t.Fatalf("%s builds %s, which make build does not build", file, bin)
			}
			want, ok := shipped[bin]
			if !ok {
				t.Fatalf("%s: %s is not in the test's list of shipped images", file, bin)
			}
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range dockerfileProblems(imagebuild.ParseDockerfile(string(data)), bin, built[bin], goVersion, want) {
				t.Errorf("%s: %s", file, p)
			}
		})
	}
}

// dockerfileProblems lists every way a Dockerfile's stages differ from
// building package pkg into image bin as want says.
func dockerfileProblems(stages []imagebuild.Stage, bin, pkg, goVersion string, want imageWant) []string {
	if len(stages) < 2 {
		return []string{fmt.Sprintf("%d stages, want a builder and a final stage", len(stages))}
	}
	builder, builds := imagebuild.FindGoBuild(stages)
	if len(builds) != 1 {
		return []string{fmt.Sprintf("%d go build commands, want 1: %+v", len(builds), builds)}
	}
	var problems []string
	report := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	gb := builds[0]
	if !slices.Equal(gb.Packages, []string{pkg}) {
		report("go build %q, want exactly %s as make build does", gb.Packages, pkg)
	}
	if !slices.Contains(gb.Flags, "-trimpath") {
		report("go build without -trimpath: %q", gb.Flags)
	}
	if path.Base(gb.Output) != bin {
		report("go build -o %q, want a file named %s", gb.Output, bin)
	}
	if gb.Env["CGO_ENABLED"] != "0" && builder.EnvVars()["CGO_ENABLED"] != "0" {
		report("CGO_ENABLED=0 is set neither in the RUN nor by ENV in the build stage")
	}
	if wantFrom := "golang:" + goVersion; builder.From != wantFrom {
		report("build stage FROM %s, want %s (go.mod says go %s)", builder.From, wantFrom, goVersion)
	}
	if p := moduleCacheProblem(builder); p != "" {
		report("%s", p)
	}

	final := stages[len(stages)-1]
	if final.From != want.base {
		report("final stage FROM %s, want %s", final.From, want.base)
	}
	copied := slices.ContainsFunc(final.Instrs, func(in imagebuild.Instruction) bool {
		return in.Cmd == "COPY" && slices.Contains(imagebuild.ShellFields(in.Args), "--from="+builder.Name) && slices.Contains(imagebuild.ShellFields(in.Args), gb.Output)
	})
	if builder.Name == "" || !copied {
		report("final stage does not COPY --from=<build stage> %s", gb.Output)
	}
	var entrypoint []string
	if err := json.Unmarshal([]byte(final.Last("ENTRYPOINT")), &entrypoint); err != nil || len(entrypoint) == 0 || path.Base(entrypoint[0]) != bin {
		report("ENTRYPOINT %s, want the exec form running %s", final.Last("ENTRYPOINT"), bin)
	}
	if got := final.AptPackages(); !slices.Equal(got, want.packages) {
		report("final stage installs %q, want %q", got, want.packages)
	}
	return problems
}

// moduleCacheProblem: go.mod and go.sum are copied alone and downloaded
// before the sources, so that a source change reuses the module layer.
func moduleCacheProblem(builder imagebuild.Stage) string {
	var copies []string
	for _, in := range builder.Instrs {
		switch {
		case in.Cmd == "COPY":
			copies = append(copies, in.Args)
		case in.Cmd == "RUN" && strings.Contains(in.Args, "go mod download"):
			if len(copies) != 1 || copies[0] != "go.mod go.sum ./" {
				return fmt.Sprintf("go mod download after COPY %q, want after COPY go.mod go.sum ./ alone", copies)
			}
			return ""
		}
	}
	return "build stage has no RUN go mod download after COPY go.mod go.sum ./"
}

// --- Makefile ---

// makefileBinaries returns the binaries of `make build` and the package
// each is built from: the `go build` line of the build target, with
// ./cmd/... expanded to the main packages under cmd/.
func makefileBinaries(t *testing.T, root string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	var recipe []string
	inBuild := false
	for line := range strings.Lines(string(data)) {
		switch {
		case strings.HasPrefix(line, "build:"):
			inBuild = true
		case inBuild && strings.HasPrefix(line, "\t"):
			recipe = append(recipe, strings.TrimSpace(line))
		case inBuild:
			inBuild = false
		}
	}
	var builds []imagebuild.GoBuild
	for _, line := range recipe {
		builds = append(builds, imagebuild.GoBuilds(line)...)
	}
	if len(builds) != 1 {
		t.Fatalf("Makefile build target: %d go build commands, want 1: %q", len(builds), recipe)
	}
	out := map[string]string{}
	for _, pkg := range builds[0].Packages {
		dir, ok := strings.CutSuffix(pkg, "/...")
		if !ok {
			out[path.Base(pkg)] = pkg
			continue
		}
		for _, main := range mainPackages(t, root, dir) {
			out[path.Base(main)] = main
		}
	}
	if len(out) == 0 {
		t.Fatalf("Makefile build target builds nothing: %+v", builds[0])
	}
	return out
}

// mainPackages lists the main packages at or under ./dir as ./dir/...
func mainPackages(t *testing.T, root, dir string) []string {
	t.Helper()
	var mains []string
	err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		pkg, err := build.ImportDir(p, 0)
		if err == nil && pkg.Name == "main" {
			rel, _ := filepath.Rel(root, p)
			mains = append(mains, "./"+filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return mains
}

func goDirective(t *testing.T, gomod string) string {
	t.Helper()
	data, err := os.ReadFile(gomod)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(data)
	if m == nil {
		t.Fatalf("%s has no go directive", gomod)
	}
	return string(m[1])
}

// findDockerfiles maps each binary to deploy/images/<binary>/Dockerfile or
// deploy/images/Dockerfile.<binary>.
func findDockerfiles(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	dirs, _ := filepath.Glob(filepath.Join(root, "deploy", "images", "*", "Dockerfile"))
	for _, f := range dirs {
		out[filepath.Base(filepath.Dir(f))] = f
	}
	flat, _ := filepath.Glob(filepath.Join(root, "deploy", "images", "Dockerfile.*"))
	for _, f := range flat {
		bin := strings.TrimPrefix(filepath.Base(f), "Dockerfile.")
		if bin == "dockerignore" || strings.HasSuffix(bin, ".dockerignore") {
			continue
		}
		if prev, ok := out[bin]; ok {
			t.Errorf("two Dockerfiles for %s: %s and %s", bin, prev, f)
		}
		out[bin] = f
	}
	return out
}

package imagebuild

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// Builder builds images into a directory.
type Builder struct {
	// Dir receives the binaries it builds (Dir/bin) and the archives.
	Dir string
	// Repo is the repository root, where go build runs.
	Repo string
}

// Spec is an image no Dockerfile of ours describes: the test bed's own
// (kube-proxy, the pause image, an example application).
type Spec struct {
	// Name is the image's name, without tag.
	Name string
	// Base is a FROM the builder knows ("scratch", distroless, Debian);
	// Packages are Debian packages it installs from this machine (a
	// Debian base only).
	Base     string
	Packages []string
	// Executables are host files put into the image with the shared
	// libraries they need.
	Executables []Executable
	User        string
	Entrypoint  []string
	// Cmd are the default arguments to Entrypoint.
	Cmd []string
	// Files are files of the image's own (a configuration), mode 0644.
	Files map[string][]byte
}

// Executable is a host executable at a path in the image.
type Executable struct{ Src, Dest string }

// Dockerfile builds the image a Dockerfile of ours describes, named name:
// its go build run here with the Dockerfile's flags and environment, its
// final stage's base, packages, files, user and entrypoint.
func (b Builder) Dockerfile(ctx context.Context, name, dockerfile string) (Image, error) {
	r, err := ReadRecipe(dockerfile)
	if err != nil {
		return Image{}, err
	}
	bins, err := b.Compile(ctx, r.Build)
	if err != nil {
		return Image{}, fmt.Errorf("%s: %w", dockerfile, err)
	}
	return b.FromRecipe(ctx, name, r, bins[0])
}

// FromRecipe builds the image of a Recipe whose go build wrote bin (see
// Compile, which builds several recipes' binaries at once).
func (b Builder) FromRecipe(ctx context.Context, name string, r Recipe, bin string) (Image, error) {
	var exes []Executable
	for _, c := range r.Copies {
		if c.Src != r.Build.Output {
			return Image{}, fmt.Errorf("%s: COPY of %s, which the go build (-o %s) does not write", r.Dockerfile, c.Src, r.Build.Output)
		}
		exes = append(exes, Executable{Src: bin, Dest: c.Dest})
	}
	return b.build(ctx, name, r.Base, r.Packages, Spec{Executables: exes, User: r.User, Entrypoint: r.Entrypoint})
}

// Build builds the image of a Spec.
func (b Builder) Build(ctx context.Context, s Spec) (Image, error) {
	return b.build(ctx, s.Name, s.Base, s.Packages, s)
}

func (b Builder) build(ctx context.Context, name, from string, pkgs []string, s Spec) (Image, error) {
	base, ok := bases[from]
	if !ok {
		return Image{}, fmt.Errorf("image %s: base %s is not known to the local image builder", name, from)
	}
	layer := NewLayer()
	if err := base.files(layer); err != nil {
		return Image{}, fmt.Errorf("image %s: %w", name, err)
	}
	if err := addPackages(ctx, layer, base, from, pkgs); err != nil {
		return Image{}, fmt.Errorf("image %s: %w", name, err)
	}
	for _, e := range s.Executables {
		if err := addExecutableAs(ctx, layer, e); err != nil {
			return Image{}, fmt.Errorf("image %s: %w", name, err)
		}
	}
	for _, dest := range slices.Sorted(maps.Keys(s.Files)) {
		layer.AddFile(dest, 0o644, s.Files[dest])
	}
	cfg := Config{User: base.user, Env: base.env, Entrypoint: s.Entrypoint, Cmd: s.Cmd}
	if s.User != "" {
		cfg.User = s.User
	}
	if err := os.MkdirAll(b.Dir, 0o755); err != nil {
		return Image{}, err
	}
	return WriteArchive(b.Dir, name, layer, cfg)
}

// addExecutableAs adds e.Src as e.Dest (with its mode) and the libraries it
// needs at their host paths.
func addExecutableAs(ctx context.Context, l *Layer, e Executable) error {
	if err := l.AddHostFile(e.Src, e.Dest); err != nil {
		return err
	}
	libs, err := sharedLibraries(ctx, e.Src)
	if err != nil {
		return err
	}
	for _, lib := range libs {
		if err := l.AddHostPath(lib); err != nil {
			return err
		}
	}
	return nil
}

// Compile runs go builds (Dockerfiles', say) in the repository, as one go
// build when they agree on environment and flags (they then share their
// compile work and link at once), writing each binary to Dir/bin under the
// name of its -o. It returns the binaries' paths in the order given.
func (b Builder) Compile(ctx context.Context, builds ...GoBuild) ([]string, error) {
	if len(builds) == 0 {
		return nil, nil
	}
	first := builds[0]
	outDir := filepath.Join(b.Dir, "bin")
	var pkgs, bins []string
	for _, gb := range builds {
		if gb.Output == "" || len(gb.Packages) != 1 {
			return nil, errors.New("want go builds of one package each, with -o")
		}
		if !maps.Equal(gb.Env, first.Env) || !slices.Equal(flagsBut(gb.Flags, "-o="), flagsBut(first.Flags, "-o=")) {
			return nil, fmt.Errorf("go builds of %s and %s differ in environment or flags", first.Packages[0], gb.Packages[0])
		}
		if path.Base(gb.Output) != path.Base(gb.Packages[0]) {
			return nil, fmt.Errorf("go build -o %s of %s: want the binary named after its package", gb.Output, gb.Packages[0])
		}
		pkgs = append(pkgs, gb.Packages[0])
		bins = append(bins, filepath.Join(outDir, path.Base(gb.Output)))
	}
	args := append([]string{"build"}, flagsBut(first.Flags, "-o=")...)
	args = append(append(args, "-o", outDir+"/"), pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = b.Repo
	cmd.Env = os.Environ()
	for k, v := range first.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if output, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, output)
	}
	return bins, nil
}

// flagsBut drops the flags starting with prefix.
func flagsBut(flags []string, prefix string) []string {
	var out []string
	for _, f := range flags {
		if !strings.HasPrefix(f, prefix) {
			out = append(out, f)
		}
	}
	return out
}

package images

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
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
	// Base is a FROM the builder knows ("scratch", distroless, Debian).
	Base string
	// Executables are host files put into the image with the shared
	// libraries they need.
	Executables []Executable
	User        string
	Entrypoint  []string
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
	bin, err := b.Compile(ctx, r.Build)
	if err != nil {
		return Image{}, fmt.Errorf("%s: %w", dockerfile, err)
	}
	var exes []Executable
	for _, c := range r.Copies {
		if c.Src != r.Build.Output {
			return Image{}, fmt.Errorf("%s: COPY of %s, which the go build (-o %s) does not write", dockerfile, c.Src, r.Build.Output)
		}
		exes = append(exes, Executable{Src: bin, Dest: c.Dest})
	}
	return b.build(ctx, name, r.Base, r.Packages, Spec{Executables: exes, User: r.User, Entrypoint: r.Entrypoint})
}

// Build builds the image of a Spec.
func (b Builder) Build(ctx context.Context, s Spec) (Image, error) {
	return b.build(ctx, s.Name, s.Base, nil, s)
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
	cfg := Config{User: base.user, Env: base.env, Entrypoint: s.Entrypoint}
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

// Compile runs a go build (a Dockerfile's, say) in the repository, writing
// the binary to Dir/bin under the name of its -o, and returns its path.
func (b Builder) Compile(ctx context.Context, gb GoBuild) (string, error) {
	if gb.Output == "" || len(gb.Packages) != 1 {
		return "", errors.New("want a go build of one package with -o")
	}
	out := filepath.Join(b.Dir, "bin", path.Base(gb.Output))
	args := []string{"build"}
	for _, f := range gb.Flags {
		if !strings.HasPrefix(f, "-o=") {
			args = append(args, f)
		}
	}
	args = append(args, "-o", out, gb.Packages[0])
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = b.Repo
	cmd.Env = os.Environ()
	for k, v := range gb.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if output, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, output)
	}
	return out, nil
}

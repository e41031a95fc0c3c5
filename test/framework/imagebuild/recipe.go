package imagebuild

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
)

// Recipe is what one of our Dockerfiles builds, in the terms the local
// builder knows: a go build in a build stage, then a final stage of a known
// base, Debian packages, the built binary copied in, a user and an
// entrypoint.
type Recipe struct {
	// Dockerfile is the file read.
	Dockerfile string
	// Build is the build stage's go build; its Env includes the stage's
	// ENV instructions.
	Build GoBuild
	// Base is the final stage's FROM; Packages what it apt-get installs.
	Base     string
	Packages []string
	// Copies are the final stage's COPY --from=<build stage> instructions.
	Copies []Copy
	// User and Entrypoint are the image config's (User empty: the base's).
	User       string
	Entrypoint []string
}

// Copy is a file copied from the build stage into the image.
type Copy struct{ Src, Dest string }

// ReadRecipe reads a Dockerfile and reports every instruction of its final
// stage that the local builder does not understand, at once.
func ReadRecipe(path string) (Recipe, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Recipe{}, fmt.Errorf("read recipe: %w", err)
	}
	r, err := recipeOf(ParseDockerfile(string(data)))
	if err != nil {
		return Recipe{}, fmt.Errorf("%s: %w", path, err)
	}
	r.Dockerfile = path
	return r, nil
}

func recipeOf(stages []Stage) (Recipe, error) {
	if len(stages) < 2 {
		return Recipe{}, fmt.Errorf("%d stages, want a build stage and a final stage", len(stages))
	}
	builder, builds := FindGoBuild(stages)
	if len(builds) != 1 {
		return Recipe{}, fmt.Errorf("%d go build commands, want 1", len(builds))
	}
	r := Recipe{Build: builds[0]}
	for name, value := range builder.EnvVars() {
		if _, set := r.Build.Env[name]; !set {
			r.Build.Env[name] = value
		}
	}
	final := stages[len(stages)-1]
	r.Base = final.From
	var errs []error
	for _, in := range final.Instrs {
		if err := r.add(in, builder.Name); err != nil {
			errs = append(errs, fmt.Errorf("final stage: %s %s: %w", in.Cmd, in.Args, err))
		}
	}
	if len(r.Entrypoint) == 0 {
		errs = append(errs, errors.New("final stage has no ENTRYPOINT"))
	}
	return r, errors.Join(errs...)
}

// add takes one instruction of the final stage into r.
func (r *Recipe) add(in Instruction, builder string) error {
	switch in.Cmd {
	case "RUN":
		return r.addRun(in.Args)
	case "COPY":
		f := ShellFields(in.Args)
		if len(f) != 3 || builder == "" || f[0] != "--from="+builder {
			return fmt.Errorf("want COPY --from=%s <file> <dest>", builder)
		}
		r.Copies = append(r.Copies, Copy{Src: f[1], Dest: f[2]})
	case "USER":
		r.User = in.Args
	case "ENTRYPOINT":
		var ep []string
		if err := json.Unmarshal([]byte(in.Args), &ep); err != nil || len(ep) == 0 {
			return errors.New("want the exec form, a JSON list")
		}
		r.Entrypoint = ep
	default:
		return errors.New("not understood by the local image builder")
	}
	return nil
}

// addRun accepts apt-get update, apt-get install and the removal of apt's
// lists, the only commands our final stages run.
func (r *Recipe) addRun(line string) error {
	for _, c := range ShellCommands(line) {
		switch {
		case len(c) == 2 && c[0] == "apt-get" && c[1] == "update":
		case len(c) > 2 && c[0] == "apt-get" && c[1] == "install":
			for _, a := range c[2:] {
				if !strings.HasPrefix(a, "-") && !slices.Contains(r.Packages, a) {
					r.Packages = append(r.Packages, a)
				}
			}
		case slices.Equal(c, []string{"rm", "-rf", "/var/lib/apt/lists/*"}):
		default:
			return fmt.Errorf("command %q not understood by the local image builder", strings.Join(c, " "))
		}
	}
	return nil
}

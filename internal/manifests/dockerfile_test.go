package manifests

import (
	"slices"
	"strings"
)

// A small reader of Dockerfiles and shell command lines, enough to check
// what our Dockerfiles build; not a general parser.

// stage is one FROM and the instructions after it.
type stage struct {
	from, name string
	instrs     []instruction
}

type instruction struct {
	cmd  string // upper case
	args string
}

// parseDockerfile joins continued lines, drops comments and blank lines and
// splits the instructions into stages.
func parseDockerfile(data string) []stage {
	var stages []stage
	var cur strings.Builder
	flush := func() {
		line := strings.TrimSpace(cur.String())
		cur.Reset()
		if line == "" {
			return
		}
		cmd, args, _ := strings.Cut(line, " ")
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		if in.cmd == "FROM" {
			f := strings.Fields(in.args)
			st := stage{from: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			}
			stages = append(stages, st)
			return
		}
		if len(stages) > 0 {
			stages[len(stages)-1].instrs = append(stages[len(stages)-1].instrs, in)
		}
	}
	for line := range strings.Lines(data) {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") {
			continue // comments, also inside a continued instruction
		}
		if body, ok := strings.CutSuffix(trimmed, `\`); ok {
			cur.WriteString(body + " ")
			continue
		}
		cur.WriteString(trimmed)
		flush()
	}
	flush()
	return stages
}

// env reports whether an ENV instruction of the stage sets name=value.
func (s stage) env(name, value string) bool {
	for _, in := range s.instrs {
		if in.cmd != "ENV" {
			continue
		}
		for _, f := range shellFields(in.args) {
			if f == name+"="+value {
				return true
			}
		}
	}
	return false
}

// last returns the arguments of the stage's last instruction cmd.
func (s stage) last(cmd string) string {
	for _, in := range slices.Backward(s.instrs) {
		if in.cmd == cmd {
			return in.args
		}
	}
	return ""
}

// aptPackages lists what `apt-get install` installs in the stage; options
// are dropped.
func (s stage) aptPackages() []string {
	var pkgs []string
	for _, in := range s.instrs {
		if in.cmd != "RUN" {
			continue
		}
		for _, c := range shellCommands(in.args) {
			if len(c) >= 2 && c[0] == "apt-get" && c[1] == "install" {
				for _, a := range c[2:] {
					if !strings.HasPrefix(a, "-") {
						pkgs = append(pkgs, a)
					}
				}
			}
		}
	}
	return pkgs
}

// findGoBuild returns the stage running go build, and its go builds.
func findGoBuild(stages []stage) (stage, []goBuild) {
	var found stage
	var builds []goBuild
	for _, st := range stages {
		for _, in := range st.instrs {
			if in.cmd != "RUN" {
				continue
			}
			if b := goBuilds(in.args); len(b) > 0 {
				found, builds = st, append(builds, b...)
			}
		}
	}
	return found, builds
}

// goBuild is one `go build` command.
type goBuild struct {
	env      map[string]string // NAME=value assignments before it
	flags    []string
	output   string
	packages []string
}

// goFlagsWithValue are go build flags whose value may be the next word.
var goFlagsWithValue = []string{
	"-o", "-C", "-p", "-ldflags", "-gcflags", "-asmflags", "-gccgoflags", "-tags", "-mod",
	"-modfile", "-pkgdir", "-buildmode", "-compiler", "-installsuffix", "-overlay", "-pgo",
	"-toolexec", "-covermode", "-coverpkg", "-exec",
}

// goBuilds finds the go build commands of a shell command line.
func goBuilds(line string) []goBuild {
	var out []goBuild
	for _, words := range shellCommands(line) {
		env := map[string]string{}
		for len(words) > 0 && strings.Contains(words[0], "=") && !strings.HasPrefix(words[0], "-") {
			name, value, _ := strings.Cut(words[0], "=")
			env[name] = value
			words = words[1:]
		}
		if len(words) < 2 || words[0] != "go" || words[1] != "build" {
			continue
		}
		b := goBuild{env: env}
		args := words[2:]
		for i := 0; i < len(args); i++ {
			a := args[i]
			switch {
			case !strings.HasPrefix(a, "-"):
				b.packages = append(b.packages, a)
			case slices.Contains(goFlagsWithValue, a) && i+1 < len(args):
				if a == "-o" {
					b.output = args[i+1]
				}
				b.flags = append(b.flags, a+"="+args[i+1])
				i++
			default:
				if v, ok := strings.CutPrefix(a, "-o="); ok {
					b.output = v
				}
				b.flags = append(b.flags, a)
			}
		}
		out = append(out, b)
	}
	return out
}

// shellCommands splits a command line into simple commands at &&, ||, ;
// and |, each a list of words.
func shellCommands(line string) [][]string {
	var cmds [][]string
	var cur []string
	for _, w := range shellFields(line) {
		switch w {
		case "&&", "||", ";", "|":
			if len(cur) > 0 {
				cmds = append(cmds, cur)
			}
			cur = nil
		default:
			cur = append(cur, w)
		}
	}
	if len(cur) > 0 {
		cmds = append(cmds, cur)
	}
	return cmds
}

// shellFields splits words as a POSIX shell would for plain words, single
// and double quotes and backslashes; a trailing ; is its own word.
func shellFields(s string) []string {
	var words []string
	var w strings.Builder
	inWord := false
	var quote rune
	end := func() {
		if inWord {
			words = append(words, w.String())
		}
		w.Reset()
		inWord = false
	}
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote == '\'':
			w.WriteRune(r)
		case r == '\\' && i+1 < len(rs):
			i++
			w.WriteRune(rs[i])
			inWord = true
		case quote == '"':
			w.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t' || r == '\n':
			end()
		case r == ';':
			end()
			words = append(words, ";")
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	end()
	return words
}

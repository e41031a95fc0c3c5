package imagebuild

import (
	"slices"
	"strings"
)

// A small reader of Dockerfiles and shell command lines, enough for what
// our Dockerfiles do (and for their tests to check it); not a general
// parser.

// Stage is one FROM and the instructions after it.
type Stage struct {
	// From is the base image; Name the stage's name after AS, if any.
	From, Name string
	Instrs     []Instruction
}

// Instruction is one instruction, continued lines joined.
type Instruction struct {
	Cmd  string // upper case
	Args string
}

// ParseDockerfile joins continued lines, drops comments and blank lines and
// splits the instructions into stages.
func ParseDockerfile(data string) []Stage {
	var stages []Stage
	var cur strings.Builder
	flush := func() {
		line := strings.TrimSpace(cur.String())
		cur.Reset()
		if line == "" {
			return
		}
		cmd, args, _ := strings.Cut(line, " ")
		in := Instruction{Cmd: strings.ToUpper(cmd), Args: strings.TrimSpace(args)}
		if in.Cmd == "FROM" {
			f := strings.Fields(in.Args)
			st := Stage{From: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.Name = f[2]
			}
			stages = append(stages, st)
			return
		}
		if len(stages) > 0 {
			stages[len(stages)-1].Instrs = append(stages[len(stages)-1].Instrs, in)
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

// EnvVars returns what the stage's ENV instructions set, in order (a later
// one wins).
func (s Stage) EnvVars() map[string]string {
	env := map[string]string{}
	for _, in := range s.Instrs {
		if in.Cmd != "ENV" {
			continue
		}
		for _, f := range ShellFields(in.Args) {
			if name, value, ok := strings.Cut(f, "="); ok {
				env[name] = value
			}
		}
	}
	return env
}

// Last returns the arguments of the stage's last instruction cmd.
func (s Stage) Last(cmd string) string {
	for _, in := range slices.Backward(s.Instrs) {
		if in.Cmd == cmd {
			return in.Args
		}
	}
	return ""
}

// AptPackages lists what `apt-get install` installs in the stage; options
// are dropped.
func (s Stage) AptPackages() []string {
	var pkgs []string
	for _, in := range s.Instrs {
		if in.Cmd != "RUN" {
			continue
		}
		for _, c := range ShellCommands(in.Args) {
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

// FindGoBuild returns the stage running go build, and its go builds.
func FindGoBuild(stages []Stage) (Stage, []GoBuild) {
	var found Stage
	var builds []GoBuild
	for _, st := range stages {
		for _, in := range st.Instrs {
			if in.Cmd != "RUN" {
				continue
			}
			if b := GoBuilds(in.Args); len(b) > 0 {
				found, builds = st, append(builds, b...)
			}
		}
	}
	return found, builds
}

// GoBuild is one `go build` command.
type GoBuild struct {
	// Env holds the NAME=value assignments before it.
	Env map[string]string
	// Flags are the flags, each one word ("-o=/out/x", "-ldflags=-s -w").
	Flags []string
	// Output is the value of -o.
	Output   string
	Packages []string
}

// goFlagsWithValue are go build flags whose value may be the next word.
var goFlagsWithValue = []string{
	"-o", "-C", "-p", "-ldflags", "-gcflags", "-asmflags", "-gccgoflags", "-tags", "-mod",
	"-modfile", "-pkgdir", "-buildmode", "-compiler", "-installsuffix", "-overlay", "-pgo",
	"-toolexec", "-covermode", "-coverpkg", "-exec",
}

// GoBuilds finds the go build commands of a shell command line.
func GoBuilds(line string) []GoBuild {
	var out []GoBuild
	for _, words := range ShellCommands(line) {
		env := map[string]string{}
		for len(words) > 0 && strings.Contains(words[0], "=") && !strings.HasPrefix(words[0], "-") {
			name, value, _ := strings.Cut(words[0], "=")
			env[name] = value
			words = words[1:]
		}
		if len(words) < 2 || words[0] != "go" || words[1] != "build" {
			continue
		}
		b := GoBuild{Env: env}
		args := words[2:]
		for i := 0; i < len(args); i++ {
			a := args[i]
			switch {
			case !strings.HasPrefix(a, "-"):
				b.Packages = append(b.Packages, a)
			case slices.Contains(goFlagsWithValue, a) && i+1 < len(args):
				if a == "-o" {
					b.Output = args[i+1]
				}
				b.Flags = append(b.Flags, a+"="+args[i+1])
				i++
			default:
				if v, ok := strings.CutPrefix(a, "-o="); ok {
					b.Output = v
				}
				b.Flags = append(b.Flags, a)
			}
		}
		out = append(out, b)
	}
	return out
}

// ShellCommands splits a command line into simple commands at &&, ||, ;
// and |, each a list of words.
func ShellCommands(line string) [][]string {
	var cmds [][]string
	var cur []string
	for _, w := range ShellFields(line) {
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

// ShellFields splits words as a POSIX shell would for plain words, single
// and double quotes and backslashes; a trailing ; is its own word.
func ShellFields(s string) []string {
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

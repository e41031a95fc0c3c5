package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestParseBad parses each case of testdata/parse-bad and checks that Parse
// refuses it with exactly the problems the case lists, in order. A case
// file holds what the case is about, then two sections:
//
//	-- config --
//	the cloud-config text, as Parse reads it
//	-- errors --
//	3: a part of the message of the problem on line 3
//	0: a problem of the whole file
//
// Lines are counted from the first line after "-- config --".
// A config with bytes a text file should not hold (NUL, invalid UTF-8) is
// written in a "-- config-quoted --" section instead: one Go string
// literal a line, joined. With -update the errors section is rewritten
// from what Parse reports: an expectation that still matches stays as
// written, any other becomes the whole message.
func TestParseBad(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "parse-bad", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatal("no cases in testdata/parse-bad")
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			c := readBadCase(t, path)
			cfg, err := Parse("cloud.conf", c.config)
			if cfg != nil {
				t.Errorf("Parse returned a Config with error %v", err)
			}
			if *update {
				c.want = updatedProblems(t, err, c.want)
				if err := os.WriteFile(path, c.format(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			checkProblems(t, err, c.want)
		})
	}
}

// badCase is one case of TestParseBad.
type badCase struct {
	about  string // the text before the first section
	config []byte
	quoted bool // config is written as Go string literals
	want   []problem
}

func readBadCase(t *testing.T, path string) badCase {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := parseBadCase(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return c
}

// parseBadCase reads a case file: text, then sections, each opened by a
// line "-- name --" and running to the next one.
func parseBadCase(data []byte) (badCase, error) {
	var c badCase
	var about []byte
	sections := map[string][]byte{}
	current := ""
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		if name, ok := sectionName(line); ok {
			if _, dup := sections[name]; dup {
				return c, fmt.Errorf("section %q given twice", name)
			}
			sections[name], current = []byte{}, name
			continue
		}
		if current == "" {
			about = append(about, line...)
		} else {
			sections[current] = append(sections[current], line...)
		}
	}
	c.about = string(about)
	errs, ok := sections["errors"]
	if !ok {
		return c, errors.New("no errors section")
	}
	delete(sections, "errors")
	var err error
	if c.want, err = parseProblems(errs); err != nil {
		return c, err
	}
	config, plain := sections["config"]
	quoted, isQuoted := sections["config-quoted"]
	delete(sections, "config")
	delete(sections, "config-quoted")
	switch {
	case plain == isQuoted:
		return c, errors.New("want one config or config-quoted section")
	case len(sections) > 0:
		return c, fmt.Errorf("unknown sections %v", sections)
	case plain:
		c.config = config
	default:
		c.quoted = true
		if c.config, err = unquoteLines(quoted); err != nil {
			return c, err
		}
	}
	return c, nil
}

func sectionName(line []byte) (string, bool) {
	s := strings.TrimSuffix(string(line), "\n")
	if len(s) < len("-- x --") || !strings.HasPrefix(s, "-- ") || !strings.HasSuffix(s, " --") {
		return "", false
	}
	return s[len("-- ") : len(s)-len(" --")], true
}

// parseProblems reads lines "line: message".
func parseProblems(b []byte) ([]problem, error) {
	var out []problem
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if l == "" {
			continue
		}
		num, msg, ok := strings.Cut(l, ": ")
		line, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("errors: %q is not \"line: message\"", l)
		}
		out = append(out, problem{line, msg})
	}
	return out, nil
}

// unquoteLines joins the Go string literals of b, one a line.
func unquoteLines(b []byte) ([]byte, error) {
	var out []byte
	for _, l := range strings.Split(string(b), "\n") {
		if l == "" {
			continue
		}
		s, err := strconv.Unquote(l)
		if err != nil {
			return nil, fmt.Errorf("config-quoted: %s: %w", l, err)
		}
		out = append(out, s...)
	}
	return out, nil
}

// format writes c as parseBadCase reads it.
func (c badCase) format() []byte {
	var b bytes.Buffer
	b.WriteString(c.about)
	if c.quoted {
		b.WriteString("-- config-quoted --\n")
		for _, l := range bytes.SplitAfter(c.config, []byte("\n")) {
			if len(l) > 0 {
				b.WriteString(strconv.Quote(string(l)) + "\n")
			}
		}
	} else {
		b.WriteString("-- config --\n")
		b.Write(c.config)
	}
	b.WriteString("-- errors --\n")
	for _, p := range c.want {
		fmt.Fprintf(&b, "%d: %s\n", p.line, p.msg)
	}
	return b.Bytes()
}

// updatedProblems are the problems err lists, each written as in want
// where want's still matches it.
func updatedProblems(t *testing.T, err error, want []problem) []problem {
	t.Helper()
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("Parse error = %v, want Errors", err)
	}
	out := make([]problem, len(errs))
	for i, e := range errs {
		out[i] = problem{e.Line, e.Error()}
		if i < len(want) && want[i].line == e.Line && strings.Contains(e.Error(), want[i].msg) {
			out[i].msg = want[i].msg
		}
		if strings.Contains(out[i].msg, "\n") {
			t.Fatalf("problem %d has a line break; a case file cannot hold it: %q", i, out[i].msg)
		}
	}
	return out
}

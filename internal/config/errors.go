package config

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Error is one problem in a cloud-config file.
type Error struct {
	File    string // the name given to Parse
	Line    int    // 1-based; 0 for a problem with the file as a whole
	Section string // e.g. `Machine "web-1"`; empty outside any section
	Key     string // e.g. "zone"; empty if the problem is not one key's
	Msg     string
}

// Error formats e like `cloud.conf:12: [Machine "web-1"] zone: must not be empty`.
func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case e.File != "" && e.Line > 0:
		fmt.Fprintf(&b, "%s:%d: ", e.File, e.Line)
	case e.File != "":
		b.WriteString(e.File + ": ")
	case e.Line > 0:
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Section != "" {
		b.WriteString("[" + e.Section + "]")
		if e.Key != "" {
			b.WriteString(" " + e.Key)
		}
		b.WriteString(": ")
	} else if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in one file, sorted by line. Parse returns
// it as its error; use errors.As to get at the individual problems.
type Errors []*Error

// Error returns one line per problem.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.As find an individual *Error.
func (es Errors) Unwrap() []error {
	errs := make([]error, len(es))
	for i, e := range es {
		errs[i] = e
	}
	return errs
}

// problems collects the Errors of one Parse.
type problems struct {
	file string
	list Errors
}

func (p *problems) add(line int, section, key, format string, args ...any) {
	p.list = append(p.list, &Error{
		File: p.file, Line: line, Section: section, Key: key,
		Msg: fmt.Sprintf(format, args...),
	})
}

// err returns the problems sorted by line (keeping the order in which
// problems on one line were found), or nil if there are none.
func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	slices.SortStableFunc(p.list, func(a, b *Error) int { return cmp.Compare(a.Line, b.Line) })
	return p.list
}

// sectionLabel is how a section is named in messages: `Global`, `Machine "web-1"`.
func sectionLabel(name, sub string) string {
	if sub == "" {
		return name
	}
	return name + " " + strconv.Quote(sub)
}

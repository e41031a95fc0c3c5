package config

import (
	"bytes"
	"errors"
	"fmt"

	"gopkg.in/gcfg.v1/scanner"
	"gopkg.in/gcfg.v1/token"
)

// rawSection is a section as written, before any name or value is
// interpreted.
type rawSection struct {
	Name    string // as written; names are matched case-insensitively
	Sub     string // unquoted subsection name; "" if none
	Line    int
	Broken  bool // the header is unreadable; its entries are dropped
	Entries []rawEntry
}

// rawEntry is one "key = value" or "key" line.
type rawEntry struct {
	Key   string // as written
	Line  int
	Blank bool   // written as "key" alone, without "= value"
	Value string // unquoted and unescaped
}

// utf8BOM is skipped at the start of a file, as gcfg.ReadFileInto does.
var utf8BOM = []byte("\ufeff")

// readRaw splits src into sections and entries with gcfg's scanner. It
// reports every syntax error, at most one per line, and recovers at the
// next line; an entry on a line with a syntax error is dropped.
func readRaw(src []byte, p *problems) []*rawSection {
	src = bytes.TrimPrefix(src, utf8BOM)
	fset := token.NewFileSet()
	file := fset.AddFile("", fset.Base(), len(src))
	file.SetLinesForContent(src)
	r := &rawReader{file: file, p: p, badLines: map[int]bool{}}
	r.s.Init(file, src, r.scanError, 0)
	r.next()
	for r.tok != token.EOF {
		switch r.tok {
		case token.EOL, token.COMMENT:
			r.next()
		case token.LBRACK:
			r.header()
		case token.IDENT:
			r.entry()
		default:
			r.fail("expected a section header such as [Global] or a key = value line")
		}
	}
	return r.sections
}

type rawReader struct {
	s    scanner.Scanner
	file *token.File
	p    *problems

	pos token.Pos
	tok token.Token
	lit string

	errOffsets []int        // offset of every syntax error, in the order found
	badLines   map[int]bool // lines that already have a syntax error reported
	sections   []*rawSection
}

func (r *rawReader) next() { r.pos, r.tok, r.lit = r.s.Scan() }

func (r *rawReader) line(pos token.Pos) int { return r.file.Line(pos) }

func (r *rawReader) offset(pos token.Pos) int { return r.file.Offset(pos) }

func (r *rawReader) scanError(pos token.Position, msg string) {
	r.syntaxError(pos.Offset, pos.Line, msg)
}

func (r *rawReader) syntaxError(offset, line int, msg string) {
	r.errOffsets = append(r.errOffsets, offset)
	if r.badLines[line] {
		return
	}
	r.badLines[line] = true
	r.p.add(line, "", "", "syntax error: %s", msg)
}

// fail reports a syntax error at the current token and skips to the end of
// its line.
func (r *rawReader) fail(format string, args ...any) {
	r.syntaxError(r.offset(r.pos), r.line(r.pos), fmt.Sprintf(format, args...))
	r.skipLine()
}

func (r *rawReader) skipLine() {
	for r.tok != token.EOL && r.tok != token.EOF {
		r.next()
	}
}

// errorIn reports whether a syntax error was found in src[from:to]. Errors
// are found in nearly ascending order, so only the last few are looked at.
// The bound matters: scanning a line's end reads the first character of the
// next line, and an error there is not this line's.
func (r *rawReader) errorIn(from, to int) bool {
	for i := len(r.errOffsets) - 1; i >= 0 && r.errOffsets[i] >= from; i-- {
		if r.errOffsets[i] < to {
			return true
		}
	}
	return false
}

func atEndOfLine(tok token.Token) bool {
	return tok == token.EOL || tok == token.EOF || tok == token.COMMENT
}

// header reads `[name]` or `[name "sub"]`. The section is opened even when
// only its closing bracket is wrong, so that its keys are still checked.
func (r *rawReader) header() {
	start := r.offset(r.pos)
	sec := &rawSection{Line: r.line(r.pos)}
	r.sections = append(r.sections, sec)
	r.next()
	if r.tok != token.IDENT {
		sec.Broken = true
		r.fail("expected a section name after '['")
		return
	}
	sec.Name = r.lit
	r.next()
	if r.tok == token.STRING {
		sub, err := unquote(r.lit)
		r.next()
		switch {
		case r.errorIn(start, r.offset(r.pos)):
			sec.Broken = true // the scanner has said what is wrong
			r.skipLine()
			return
		case err != nil:
			sec.Broken = true
			r.fail("section name: %v", err)
			return
		case sub == "":
			sec.Broken = true
			r.fail("empty section name \"\"; leave it out instead")
			return
		}
		sec.Sub = sub
	}
	if r.tok != token.RBRACK {
		// With only the bracket missing, the section is still clear.
		sec.Broken = !atEndOfLine(r.tok) || r.errorIn(start, r.offset(r.pos))
		r.fail("expected ']' to close the section header")
		return
	}
	r.next()
	if !atEndOfLine(r.tok) {
		r.fail("unexpected text after ']'")
	}
}

// entry reads `key`, `key = value`, or `key =`.
func (r *rawReader) entry() {
	start := r.offset(r.pos)
	e := rawEntry{Key: r.lit, Line: r.line(r.pos)}
	r.next()
	var raw string
	switch {
	case atEndOfLine(r.tok):
		e.Blank = true
	case r.tok == token.ASSIGN:
		r.next() // the scanner returns everything up to a comment or EOL as one STRING
		raw = r.lit
		r.next()
		if !atEndOfLine(r.tok) {
			if r.errorIn(start, r.offset(r.pos)) {
				r.skipLine() // the scanner has said what is wrong
			} else {
				r.fail("unexpected text after the value of %q", e.Key)
			}
			return
		}
	default:
		r.fail("expected '=' after key %q", e.Key)
		return
	}
	if r.errorIn(start, r.offset(r.pos)) {
		return
	}
	if !e.Blank {
		v, err := unquote(raw)
		if err != nil {
			r.syntaxError(start, e.Line, fmt.Sprintf("value of %q: %v", e.Key, err))
			return
		}
		e.Value = v
	}
	if len(r.sections) == 0 {
		r.syntaxError(start, e.Line, fmt.Sprintf("key %q comes before any section header; put it under one, such as [Global]", e.Key))
		return
	}
	sec := r.sections[len(r.sections)-1]
	if !sec.Broken {
		sec.Entries = append(sec.Entries, e)
	}
}

var unescape = map[rune]rune{'\\': '\\', '"': '"', 'n': '\n', 't': '\t'}

// unquote is gcfg's unquote, returning an error where gcfg panics: it drops
// double quotes, resolves \\ \" \n \t escapes and joins lines continued
// with a trailing backslash.
func unquote(s string) (string, error) {
	u, q, esc := make([]rune, 0, len(s)), false, false
	for _, c := range s {
		if esc {
			esc = false
			if uc, ok := unescape[c]; ok {
				u = append(u, uc)
				continue
			}
			if !q && c == '\n' {
				continue
			}
			return "", errInvalidEscape
		}
		switch c {
		case '"':
			q = !q
		case '\\':
			esc = true
		default:
			u = append(u, c)
		}
	}
	switch {
	case q:
		return "", errors.New("missing closing double quote")
	case esc:
		return "", errInvalidEscape
	}
	return string(u), nil
}

var errInvalidEscape = errors.New(`invalid escape sequence; use \\ \" \n or \t`)

package annotation

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strconv"
	"testing"
)

// TestAnnotationsDocumented checks docs/annotations.md against
// ServiceAnnotations: each has a section, and the doc names no other
// groundcloud.io annotation.
func TestAnnotationsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/annotations.md")
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, m := range regexp.MustCompile(`(?m)^## (groundcloud\.io/\S+)$`).FindAllSubmatch(doc, -1) {
		documented = append(documented, string(m[1]))
	}
	code := sorted(ServiceAnnotations())
	if documented = sorted(documented); !slices.Equal(code, documented) {
		t.Errorf("docs/annotations.md documents %v; the code reads %v", documented, code)
	}
}

// TestServiceAnnotationsComplete checks that ServiceAnnotations lists every
// constant of service.go, so that one added there is documented too.
func TestServiceAnnotationsComplete(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "service.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	ast.Inspect(f, func(n ast.Node) bool {
		if d, ok := n.(*ast.GenDecl); ok && d.Tok == token.CONST {
			declared = append(declared, constStrings(t, d)...)
		}
		return true
	})
	if got, want := sorted(ServiceAnnotations()), sorted(declared); !slices.Equal(got, want) {
		t.Errorf("ServiceAnnotations() is %v; service.go declares %v", got, want)
	}
}

// constStrings returns the string values of the constants d declares.
func constStrings(t *testing.T, d *ast.GenDecl) []string {
	t.Helper()
	var out []string
	for _, s := range d.Specs {
		for _, v := range s.(*ast.ValueSpec).Values {
			lit, ok := v.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				t.Fatalf("service.go: a constant is not a string literal: %#v", v)
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
	}
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

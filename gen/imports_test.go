package gen

import (
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

// TestGeneratedImports: a generated file imports only the standard library, runtime/outbox
// and the paths of the catalog's {go:} types.
func TestGeneratedImports(t *testing.T) {
	for _, c := range loadGoldens(t) {
		m, err := parse("events.yaml", []byte(c.sections[0].body))
		if err != nil {
			continue
		}
		code, err := emitFile(m)
		if err != nil {
			t.Fatal(err)
		}
		allowed := map[string]bool{}
		for _, p := range generatedImportPaths {
			allowed[p] = true
		}
		for _, p := range goImportPaths(m) {
			allowed[p] = true
		}
		f, err := parser.ParseFile(token.NewFileSet(), c.path, code, parser.ImportsOnly)
		if err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !allowed[p] {
				t.Errorf("%s: the generated file imports %q, which is neither the standard library the generator uses, runtime/outbox, nor a {go:} path", c.path, p)
			}
			if strings.Contains(p, "gopkg.in/yaml") || strings.Contains(p, "jennifer") {
				t.Errorf("%s: the generated file imports the generator's own dependency %q", c.path, p)
			}
		}
	}
}

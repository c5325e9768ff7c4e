package gen

import (
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"gopkg.in/yaml.v3"
)

// FuzzLoad feeds arbitrary bytes to the generator. It must never panic; a rejected input
// must come back as an ErrorList of positioned messages; an accepted one must emit code that
// go/parser and go/types accept, in-process (no go build per input), and an AsyncAPI
// document that parses back. The corpus under
// testdata/fuzz/FuzzLoad runs as regression cases in every go test, and TestGeneratedCodeBuilds
// builds its accepted entries for real. CI runs `go test -fuzz=FuzzLoad ./gen`.
func FuzzLoad(f *testing.F) {
	paths, err := filepath.Glob("testdata/golden/*.txt")
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		c, err := parseCase(p, data)
		if err != nil {
			f.Fatal(err)
		}
		f.Add([]byte(c.sections[0].body))
	}
	if src, err := os.ReadFile("../events.yaml"); err == nil {
		f.Add(src)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		m, err := parse("events.yaml", src)
		if err != nil {
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("a rejected catalog must give a non-empty ErrorList, got %T %v", err, err)
			}
			lines := yamlLines(src)
			for _, e := range list {
				if e.Line < 1 || e.Line > lines || e.Col < 1 || e.Msg == "" || e.Path != "events.yaml" {
					t.Fatalf("malformed problem %+v (the catalog has %d lines)", e, lines)
				}
			}
			return
		}
		code, err := emitFile(m)
		if err != nil {
			t.Fatalf("an accepted catalog failed to emit: %v\n%s", err, src)
		}
		if err := typeCheck(m, code); err != nil {
			t.Fatalf("an accepted catalog emitted code that does not type-check: %v\ncatalog:\n%s\ncode:\n%s", err, src, code)
		}
		doc, err := emitAsyncAPI(m, "events.yaml", DefaultAddressPrefix)
		if err != nil {
			t.Fatalf("an accepted catalog failed to give an AsyncAPI document: %v\n%s", err, src)
		}
		var parsed map[string]any
		if err := yaml.Unmarshal(doc, &parsed); err != nil || parsed["asyncapi"] != AsyncAPIVersion {
			t.Fatalf("the AsyncAPI document of an accepted catalog does not parse back (%v):\ncatalog:\n%s\ndocument:\n%s", err, src, doc)
		}
		// Descriptions are free text: they must come back as they were.
		messages, _ := parsed["components"].(map[string]any)["messages"].(map[string]any)
		for _, e := range m.outboxEvents() {
			msg, _ := messages[e.wire].(map[string]any)
			if msg == nil || msg["name"] != e.wire || (e.doc != "" && msg["description"] != e.doc) {
				t.Fatalf("the AsyncAPI message of %q lost its name or description %q: %#v\ndocument:\n%s", e.wire, e.doc, msg, doc)
			}
		}
	})
}

// yamlLines counts lines as yaml.v3 does: \r\n, \r, \n, NEL, LS and PS end one.
func yamlLines(src []byte) int {
	s := strings.ReplaceAll(string(src), "\r\n", "\n")
	n := 1
	for _, r := range s {
		switch r {
		case '\r', '\n', '\u0085', '\u2028', '\u2029':
			n++
		}
	}
	return n
}

var (
	importMu  sync.Mutex
	realTypes types.Importer // shared: each package's export data is read once per process
)

// typeCheck parses and type-checks one generated file. The runtime and the standard library
// come from real export data (go list -export, cached); a {go:} path stands for a package
// the generator cannot see, so it is replaced by a synthetic one whose named types are
// strings (valid for every use the generated code makes of them, idempotency keys included).
func typeCheck(m *file, code []byte) error {
	fset := token.NewFileSet()
	af, err := parser.ParseFile(fset, "outbox_gen.go", code, parser.ParseComments)
	if err != nil {
		return err
	}
	fake := map[string][]string{}
	for _, t := range allGoTypes(m) {
		fake[t.path] = append(fake[t.path], t.name)
	}
	for _, imp := range af.Imports {
		p := strings.Trim(imp.Path.Value, `"`)
		if _, isFake := fake[p]; isFake && generatorImports[p] {
			return nil // a {go:} type in a package the generated code also uses: too real to fake
		}
	}
	importMu.Lock()
	defer importMu.Unlock()
	if realTypes == nil {
		exports, err := exportData()
		if err != nil {
			return err
		}
		realTypes = importer.ForCompiler(token.NewFileSet(), "gc", func(path string) (io.ReadCloser, error) {
			f, ok := exports[path]
			if !ok {
				return nil, fmt.Errorf("no export data for %q", path)
			}
			return os.Open(f)
		})
	}
	conf := types.Config{Importer: importerFunc(func(path string) (*types.Package, error) {
		if names, ok := fake[path]; ok {
			return fakePackage(path, names), nil
		}
		return realTypes.Import(path)
	})}
	_, err = conf.Check(m.pkg, fset, []*ast.File{af}, nil)
	return err
}

// exportData lists the export data files of the runtime and of every standard package the
// generated code imports, and of their dependencies, with one go list call.
func exportData() (map[string]string, error) {
	args := []string{"list", "-export", "-deps", "-f", "{{.ImportPath}}={{.Export}}"}
	for p := range generatorImports {
		args = append(args, p)
	}
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("go list -export: %v\n%s", err, ee.Stderr)
		}
		return nil, fmt.Errorf("go list -export: %w", err)
	}
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if path, file, ok := strings.Cut(line, "="); ok && file != "" {
			m[path] = file
		}
	}
	return m, nil
}

// generatorImports are the packages generated code imports on its own.
var generatorImports = func() map[string]bool {
	m := map[string]bool{}
	for _, p := range generatedImportPaths {
		m[p] = true
	}
	return m
}()

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }

func fakePackage(path string, names []string) *types.Package {
	name := importAlias(path)
	if alias := name + "pkg"; generatedImportNames[name] && generatedImportPaths[name] != path {
		name = alias
	}
	pkg := types.NewPackage(path, name)
	for _, n := range names {
		if pkg.Scope().Lookup(n) != nil {
			continue
		}
		obj := types.NewTypeName(token.NoPos, pkg, n, nil)
		types.NewNamed(obj, types.Typ[types.String], nil)
		pkg.Scope().Insert(obj)
	}
	pkg.MarkComplete()
	return pkg
}

func allGoTypes(m *file) []*goType {
	var out []*goType
	var walk func(t *goType)
	walk = func(t *goType) {
		switch t.kind {
		case kGo:
			out = append(out, t)
		case kSlice, kMap:
			walk(t.elem)
		}
	}
	for _, t := range m.types {
		for _, fl := range t.fields {
			walk(fl.t)
		}
	}
	for _, e := range m.events {
		for _, fl := range e.fields {
			walk(fl.t)
		}
	}
	return out
}

// TestTypeCheckCatchesBadCode shows the fuzz oracle can fail: code that does not type-check
// is reported.
func TestTypeCheckCatchesBadCode(t *testing.T) {
	m, err := parse("events.yaml", []byte("version: 1\npackage: p\nevents:\n  a: {fields: {x: int}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	code, err := emitFile(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := typeCheck(m, code); err != nil {
		t.Fatalf("valid generated code failed the check: %v", err)
	}
	broken := strings.Replace(string(code), "return h.HandleA(ctx, e, d)", "return h.HandleA(ctx, d, e)", 1)
	if broken == string(code) {
		t.Fatal("test setup: the handler call was not found in the generated code")
	}
	if err := typeCheck(m, []byte(broken)); err == nil {
		t.Fatal("swapped handler arguments passed the type check")
	} else {
		t.Log(fmt.Sprint("rejected as expected: ", err))
	}
}

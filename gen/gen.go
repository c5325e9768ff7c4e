// Package gen turns an events.yaml catalog into Go code: typed payloads, EnqueueX functions,
// handler interfaces and a router over the runtime in runtime/outbox.
//
// It is a pipeline of pure stages, as sqlc and protoc-gen-go are built:
//
//	load (yaml.Node walk, keeps line:col) -> validate (every problem at once)
//	  -> model (every Go name, type and import decided) -> emit (jennifer) -> map[path][]byte
//
// Generate runs the pipeline on bytes; Write and Diff are thin wrappers that compare the result
// with the files on disk, and refuse a target that would break the user's code (a hand-written
// file, a directory of another package). Errors are an ErrorList in the go build shape
// (events.yaml:12:5: ...).
//
// The catalog is also a contract with what reads the events: AsyncAPI renders the same model
// as an AsyncAPI 3.0 document for consumers of a relay, and Breaking compares two versions of
// a catalog and reports the changes that break rows already stored or their consumers.
package gen

import (
	"bytes"
	"fmt"
	"go/build"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Generate validates the catalog src and returns the generated files, keyed by path: the
// catalog's output: joined to the directory of catalogPath. catalogPath is also the name in
// error messages, as given (events.yaml:3:5: ...). On an invalid catalog the error is an
// ErrorList holding every problem and no file is returned. The output is deterministic.
func Generate(catalogPath string, src []byte) (map[string][]byte, error) {
	m, err := parse(catalogPath, src)
	if err != nil {
		return nil, err
	}
	code, err := emitFile(m)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{filepath.FromSlash(m.path): code}, nil
}

// Summary counts what a valid catalog declares.
type Summary struct {
	Events int // under events:
	Types  int // under types:, structs and enums
}

// Check validates the catalog src without generating code, and counts what it declares.
func Check(catalogPath string, src []byte) (Summary, error) {
	m, err := parse(catalogPath, src)
	if err != nil {
		return Summary{}, err
	}
	return Summary{Events: len(m.events), Types: len(m.types)}, nil
}

func parse(catalogPath string, src []byte) (*file, error) {
	return parseIn(catalogPath, filepath.Dir(catalogPath), src)
}

// parseIn is parse for a catalog named catalogPath in messages whose {go:} key types are
// looked up from dir: breaking reads the catalog it compares against from git
// (origin/main:events.yaml), which has a name but no directory of its own.
func parseIn(catalogPath, dir string, src []byte) (*file, error) {
	ps := &problems{path: catalogPath, dir: dir, lines: lineCount(src)}
	c := load(src, ps)
	if c != nil {
		validate(c, ps)
	}
	if len(ps.list) > 0 {
		ps.list.sort()
		return nil, ps.list
	}
	return buildModel(c, filepath.ToSlash(catalogPath)), nil
}

// GenerateFile reads the catalog at catalogPath and generates from it.
func GenerateFile(catalogPath string) (map[string][]byte, error) {
	src, err := os.ReadFile(catalogPath)
	if err != nil {
		return nil, err
	}
	return Generate(catalogPath, src)
}

// Write writes each file whose content differs from what is on disk, through a temporary
// file and a rename, so a reader never sees half a file. It returns the paths it wrote. It
// writes nothing when a file would replace one written by hand, or would be in another
// package than the Go files next to it (see Diff).
func Write(files map[string][]byte) ([]string, error) {
	for _, p := range sortedKeys(files) {
		if err := checkTarget(p, files[p]); err != nil {
			return nil, err
		}
	}
	var written []string
	for _, p := range sortedKeys(files) {
		want := files[p]
		if have, err := os.ReadFile(p); err == nil && string(have) == string(want) {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return written, err
		}
		tmp, err := os.CreateTemp(filepath.Dir(p), ".outboxgen-*.tmp")
		if err != nil {
			return written, err
		}
		_, werr := tmp.Write(want)
		cerr := tmp.Close()
		if werr == nil {
			werr = cerr
		}
		if werr == nil {
			werr = os.Chmod(tmp.Name(), 0o644)
		}
		if werr == nil {
			werr = os.Rename(tmp.Name(), p)
		}
		if werr != nil {
			if rerr := os.Remove(tmp.Name()); rerr != nil && !os.IsNotExist(rerr) {
				werr = fmt.Errorf("%w (and removing %s: %v)", werr, tmp.Name(), rerr)
			}
			return written, fmt.Errorf("write %s: %w", p, werr)
		}
		written = append(written, p)
	}
	return written, nil
}

// Diff returns a unified diff from the files on disk to files, or "" when every file is
// current. A missing file diffs as empty. Diff fails where Write would: on an existing file
// without a "// Code generated ... DO NOT EDIT." line before its package clause (a file
// written by hand), and when another non-test Go file in the directory is in another package.
func Diff(files map[string][]byte) (string, error) {
	var out string
	for _, p := range sortedKeys(files) {
		if err := checkTarget(p, files[p]); err != nil {
			return "", err
		}
		have, err := os.ReadFile(p)
		if err != nil && !os.IsNotExist(err) {
			return "", err
		}
		out += unifiedDiff(p, string(have), string(files[p]))
	}
	return out, nil
}

// generatedRe is Go's convention for generated files (go help generate, ast.IsGenerated).
var generatedRe = regexp.MustCompile(`^// Code generated .* DO NOT EDIT\.$`)

// checkTarget refuses to write code to path when that would destroy a hand-written file, or
// give its directory two packages: the catalog would look fine and the build would fail.
func checkTarget(path string, code []byte) error {
	have, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	if len(bytes.TrimSpace(bytes.TrimPrefix(have, utf8BOM))) > 0 && !isGenerated(have) {
		return fmt.Errorf("%s is not generated code (no \"// Code generated ... DO NOT EDIT.\" line before its package clause): outboxgen will not overwrite it (set another output: in the catalog, or move the file)", path)
	}
	fset := token.NewFileSet()
	out, err := parser.ParseFile(fset, path, code, parser.PackageClauseOnly)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil // a directory yet to be made holds no Go files
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || name == filepath.Base(path) {
			continue
		}
		// Files go build leaves out (//go:build ignore, other GOOS) may say package main.
		if ok, err := build.Default.MatchFile(dir, name); err != nil || !ok {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.PackageClauseOnly)
		if err != nil {
			continue // go build reports it better
		}
		if f.Name.Name != out.Name.Name {
			return fmt.Errorf("%s: package %s, but %s in the same directory is package %s (set package: %s in the catalog, or choose an output: in another directory)",
				path, out.Name.Name, filepath.Join(dir, name), f.Name.Name, f.Name.Name)
		}
	}
	return nil
}

// utf8BOM is the byte order mark some editors put at the start of a file; go build skips it.
var utf8BOM = []byte("\ufeff")

// isGenerated reports whether src has the generated-code line before its package clause.
func isGenerated(src []byte) bool {
	src = bytes.TrimPrefix(src, utf8BOM)
	for _, line := range strings.Split(string(src), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if generatedRe.MatchString(line) {
			return true
		}
		if strings.HasPrefix(line, "package ") {
			return false
		}
	}
	return false
}

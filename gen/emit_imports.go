package gen

import (
	"fmt"
	"go/format"
	"sort"
	"strings"
)

// generatedImportPaths maps the package names the generated code uses to their paths.
var generatedImportPaths = map[string]string{
	"context": "context", "json": "encoding/json", "errors": "errors", "fmt": "fmt", "maps": "maps",
	"slices": "slices", "strconv": "strconv", "time": "time", "utf8": "unicode/utf8", "outbox": outboxPkg,
}

var generatedImportNames = func() map[string]bool {
	m := map[string]bool{}
	for name := range generatedImportPaths {
		m[name] = true
	}
	return m
}()

// importAlias is the name jennifer gives an import path it has no hint for: the last
// element, lowercase letters and digits only, without leading digits.
func importAlias(path string) string {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, strings.ToLower(path[strings.LastIndex(path, "/")+1:]))
	name = strings.TrimLeft(name, "0123456789")
	if name == "" {
		return "pkg"
	}
	return name
}

// goImportPaths lists the {go:} import paths of the model, sorted.
func goImportPaths(m *file) []string {
	seen := map[string]bool{}
	var walk func(t *goType)
	walk = func(t *goType) {
		switch t.kind {
		case kGo:
			seen[t.path] = true
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
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// groupImports puts the standard library first and other imports after a blank line, as
// goimports does (jennifer sorts them into one group).
func groupImports(src []byte) ([]byte, error) {
	s := string(src)
	start := strings.Index(s, "\nimport (\n")
	if start < 0 {
		return src, nil
	}
	start += len("\nimport (\n")
	end := strings.Index(s[start:], "\n)\n")
	if end < 0 {
		return src, nil
	}
	var std, other []string
	for _, line := range strings.Split(s[start:start+end], "\n") {
		spec := strings.TrimSpace(line)
		path := spec[strings.Index(spec, `"`)+1:]
		if first, _, _ := strings.Cut(path, "/"); strings.Contains(first, ".") {
			other = append(other, "\t"+spec)
		} else {
			std = append(std, "\t"+spec)
		}
	}
	block := strings.Join(std, "\n")
	if len(std) > 0 && len(other) > 0 {
		block += "\n\n"
	}
	block += strings.Join(other, "\n")
	out, err := format.Source([]byte(s[:start] + block + s[start+end:]))
	if err != nil {
		return nil, fmt.Errorf("format generated code: %w", err)
	}
	return out, nil
}

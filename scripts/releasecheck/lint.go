package main

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// lint returns every reason the modules could not be installed at version from outside the
// repository, each naming the file (and line) to fix: a replace directive in a go.mod (outside
// the repository it is ignored), a requirement on a module of the repository at another version
// than the release, an import of another module's internal package (an API that may change in
// any release; Go's internal rule follows import paths, so it compiles across modules), and a
// go.work whose version replacements do not match the release.
func lint(root, version string, mods []*mod) []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if !semver.IsValid(version) || semver.Canonical(version) != version {
		add("runtime/outbox/version.go: Version %q is not a release version vX.Y.Z", version)
	}
	byPath := map[string]*mod{}
	for _, m := range mods {
		byPath[m.Path] = m
	}
	required := map[string]bool{} // repository modules that another one requires
	for _, m := range mods {
		file := m.Dir + "/go.mod"
		for _, r := range m.File.Replace {
			add("%s:%d: replace %s: a go.mod of this repository holds no replace directive (outside the repository it is ignored; go.work serves development)",
				file, r.Syntax.Start.Line, r.Old.Path)
		}
		for _, r := range m.File.Require {
			if byPath[r.Mod.Path] == nil {
				continue
			}
			required[r.Mod.Path] = true
			if r.Mod.Version != version {
				add("%s:%d: requires %s %s, want the release %s (one version for the whole repository)",
					file, r.Syntax.Start.Line, r.Mod.Path, r.Mod.Version, version)
			}
		}
		problems = append(problems, internalImports(root, m, mods)...)
	}
	problems = append(problems, lintWork(root, version, required)...)
	return problems
}

// internalImports lists the imports, in m's Go files, of an internal package of another module
// of the repository.
func internalImports(root string, m *mod, mods []*mod) []string {
	var problems []string
	dir := filepath.Join(root, filepath.FromSlash(m.Dir))
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p == dir {
				return nil
			}
			if skipDir(d.Name()) {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir // a module of its own, checked on its own
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				continue
			}
			owner := ownerOf(path, mods)
			if owner == nil || owner == m || !isInternal(path) {
				continue
			}
			problems = append(problems, fmt.Sprintf("%s:%d: imports %s, an internal package of module %s: export what modules share, or give the module its own copy",
				filepath.ToSlash(rel), fset.Position(imp.Pos()).Line, path, owner.Path))
		}
		return nil
	})
	if err != nil {
		problems = append(problems, fmt.Sprintf("%s: %v", m.Dir, err))
	}
	return problems
}

// ownerOf returns the module of the repository that holds package path: the one with the
// longest module path that is path or a prefix of it.
func ownerOf(path string, mods []*mod) *mod {
	var best *mod
	for _, m := range mods {
		if (path == m.Path || strings.HasPrefix(path, m.Path+"/")) && (best == nil || len(m.Path) > len(best.Path)) {
			best = m
		}
	}
	return best
}

func isInternal(path string) bool {
	for _, elem := range strings.Split(path, "/") {
		if elem == "internal" {
			return true
		}
	}
	return false
}

// lintWork checks go.work's replacements: a workspace module only roots the module graph, so
// each repository module that another requires is replaced, at the release version, by its
// directory; a replacement at another version is left over from an earlier release.
func lintWork(root, version string, required map[string]bool) []string {
	data, err := os.ReadFile(filepath.Join(root, "go.work"))
	if os.IsNotExist(err) {
		return []string{"go.work: missing (it serves development and CI)"}
	}
	if err != nil {
		return []string{err.Error()}
	}
	wf, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	replaced := map[string]bool{}
	for _, r := range wf.Replace {
		if r.Old.Version != version {
			problems = append(problems, fmt.Sprintf("go.work:%d: replace %s %s: want the release %s (bump it with runtime/outbox.Version)",
				r.Syntax.Start.Line, r.Old.Path, r.Old.Version, version))
			continue
		}
		replaced[r.Old.Path] = true
	}
	for path := range required {
		if !replaced[path] {
			problems = append(problems, fmt.Sprintf("go.work: no replace %s %s => its directory (another module requires it at the release)", path, version))
		}
	}
	return problems
}

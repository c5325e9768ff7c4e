package gen

import (
	"go/build"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// A {go:} import path without a dot in its first element is a standard-library package, or
// in a module named without a dot that go.mod or go.work names. These look in GOROOT and read
// those files on disk: no go command, no network. Without a GOROOT to read, every path is
// accepted and go build has the last word.

func goroot() string {
	root := build.Default.GOROOT
	if fi, err := os.Stat(filepath.Join(root, "src", "fmt")); root == "" || err != nil || !fi.IsDir() {
		return ""
	}
	return root
}

// stdPackage reports whether importPath is a directory of GOROOT/src, or GOROOT is unknown.
func stdPackage(importPath string) bool {
	root := goroot()
	if root == "" {
		return true
	}
	fi, err := os.Stat(filepath.Join(root, "src", filepath.FromSlash(importPath)))
	return err == nil && fi.IsDir()
}

// stdByName maps the last element of each importable standard package to its paths, sorted.
var stdByName = sync.OnceValue(func() map[string][]string {
	m := map[string][]string{}
	root := goroot()
	if root == "" {
		return m
	}
	src := filepath.Join(root, "src")
	_ = filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(src, p)
		rel = filepath.ToSlash(rel)
		switch base := d.Name(); {
		case rel == "cmd" || base == "internal" || base == "vendor" || base == "testdata":
			return filepath.SkipDir
		case rel == ".":
			return nil
		}
		if hasGoFiles(p) {
			m[pkgName(rel)] = append(m[pkgName(rel)], rel)
		}
		return nil
	})
	return m
})

// stdPackagesNamed returns the standard packages named like the package at importPath.
func stdPackagesNamed(importPath string) []string { return stdByName()[pkgName(importPath)] }

var majorVersionRe = regexp.MustCompile(`^v[0-9]+$`)

// pkgName is the last element of an import path, or the one before a major version suffix
// (math/rand/v2 -> rand).
func pkgName(importPath string) string {
	if dir, last := path.Split(importPath); majorVersionRe.MatchString(last) && dir != "" {
		return path.Base(dir)
	}
	return path.Base(importPath)
}

func hasGoFiles(dir string) bool {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			return true
		}
	}
	return false
}

// inKnownModule reports whether importPath is in a module the build can see, so not a
// standard package to check: the main module (`module shop` is legal), a module its go.mod
// requires or replaces (require ids v0.0.0 with replace ids => ../ids builds fine), or one
// of a go.work above the catalog. Naming more modules than the build uses only means fewer
// errors here; go build still has the last word.
func (v *validator) inKnownModule(importPath string) bool {
	if v.modules == nil {
		mods := knownModules(v.ps.dir)
		v.modules = &mods
	}
	for _, mod := range *v.modules {
		if importPath == mod || strings.HasPrefix(importPath, mod+"/") {
			return true
		}
	}
	return false
}

// knownModules returns the modules named by the go.mod nearest above dir and by the go.work
// above it (or in $GOWORK), with the go.mod files of the modules the go.work uses.
func knownModules(dir string) []string {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil
	}
	var mods []string
	if gomod := findUp(dir, "go.mod"); gomod != "" {
		mods = readModFile(gomod).names()
	}
	works := []string{os.Getenv("GOWORK")}
	if works[0] == "off" {
		return mods
	}
	works = append(works, findUp(dir, "go.work"))
	for _, work := range works {
		if work == "" {
			continue
		}
		wf := readModFile(work)
		mods = append(mods, wf.names()...)
		for _, use := range wf.uses {
			if !filepath.IsAbs(use) {
				use = filepath.Join(filepath.Dir(work), use)
			}
			mods = append(mods, readModFile(filepath.Join(use, "go.mod")).names()...)
		}
	}
	return mods
}

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

// A {go:} import path without a dot in its first element is a standard-library package (or,
// rarely, in a main module named without a dot). These look in GOROOT on disk: no go command,
// no network. Without a GOROOT to read, every path is accepted and go build has the last word.

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

// inMainModule reports whether importPath is in the module whose go.mod is nearest above the
// catalog: `module shop` is legal, and then shop/ids.ID is no standard package.
func (v *validator) inMainModule(importPath string) bool {
	if v.module == nil {
		mod := mainModule(filepath.Dir(v.ps.path))
		v.module = &mod
	}
	mod := *v.module
	return mod != "" && (importPath == mod || strings.HasPrefix(importPath, mod+"/"))
}

// mainModule returns the module path of the go.mod in dir or the nearest parent, or "".
func mainModule(dir string) string {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			for _, line := range strings.Split(string(data), "\n") {
				if f := strings.Fields(line); len(f) >= 2 && f[0] == "module" {
					return strings.Trim(f[1], "\"`")
				}
			}
			return ""
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

package gen

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// A {go:} key field is written into the idempotency key as string(value), which compiles only
// for a string kind. The generator proves that before it writes the file: it reads the type's
// declaration from source and follows it (type ID string; type Ref = ids.ID; type Code Ref) to
// its underlying type. Source comes from where the build would take it, read from disk with no
// go command and no network: GOROOT for the standard library, else the module that provides
// the package as the catalog's go.mod and go.work say (the main module, a go.work module, a
// replace directory, vendor/, or the module cache for a required version).

// goTypeChecker resolves {go:} types for one catalog; it caches parsed packages.
type goTypeChecker struct {
	catalogDir string
	mods       []modDir // longest path first; nil until first needed
	modsRead   bool
	pkgs       map[string]*goPackage // by directory
}

// modDir says where a module's source is.
type modDir struct{ path, dir string }

type goPackage struct {
	name  string
	types map[string]*ast.TypeSpec
	files map[*ast.TypeSpec]*ast.File // the file declaring each type, for its imports
}

// goKind is what a {go:} type's declaration shows: its underlying kind ("string", "int", "a
// struct"), or why it could not be read.
type goKind struct {
	kind string // set when the declaration was followed to the end
	err  error  // set when it was not
}

// underlyingKind follows the declaration of importPath.name to its underlying type.
func (c *goTypeChecker) underlyingKind(importPath, name string) goKind {
	return c.follow(importPath, name, 0)
}

func (c *goTypeChecker) follow(importPath, name string, depth int) goKind {
	if depth > 32 {
		return goKind{err: fmt.Errorf("the declaration of %s.%s refers to itself", importPath, name)}
	}
	dir, err := c.dir(importPath)
	if err != nil {
		return goKind{err: err}
	}
	pkg := c.load(dir)
	spec := pkg.types[name]
	if spec == nil {
		return goKind{err: fmt.Errorf("package %s (%s) declares no type %s", importPath, dir, name)}
	}
	if spec.TypeParams != nil {
		return goKind{kind: "a generic type"}
	}
	return c.expr(importPath, pkg, pkg.files[spec], spec.Type, depth)
}

func (c *goTypeChecker) expr(importPath string, pkg *goPackage, file *ast.File, e ast.Expr, depth int) goKind {
	switch x := e.(type) {
	case *ast.ParenExpr:
		return c.expr(importPath, pkg, file, x.X, depth)
	case *ast.Ident:
		if pkg.types[x.Name] != nil {
			return c.follow(importPath, x.Name, depth+1)
		}
		switch x.Name {
		case "any":
			return goKind{kind: "an interface"}
		case "error":
			return goKind{kind: "an interface (error)"}
		}
		return goKind{kind: x.Name} // a predeclared type: string, int, byte, ...
	case *ast.SelectorExpr:
		id, ok := x.X.(*ast.Ident)
		if !ok {
			break
		}
		for _, imp := range file.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				continue
			}
			name := ""
			if imp.Name != nil {
				name = imp.Name.Name
			} else if d, err := c.dir(p); err == nil {
				name = c.load(d).name
			}
			if name == id.Name {
				return c.follow(p, x.Sel.Name, depth+1)
			}
		}
		return goKind{err: fmt.Errorf("%s.%s: cannot find the package it calls %s", importPath, x.Sel.Name, id.Name)}
	case *ast.StructType:
		return goKind{kind: "a struct"}
	case *ast.ArrayType:
		if x.Len == nil {
			return goKind{kind: "a slice"}
		}
		return goKind{kind: "an array"}
	case *ast.MapType:
		return goKind{kind: "a map"}
	case *ast.StarExpr:
		return goKind{kind: "a pointer"}
	case *ast.FuncType:
		return goKind{kind: "a func"}
	case *ast.InterfaceType:
		return goKind{kind: "an interface"}
	case *ast.ChanType:
		return goKind{kind: "a channel"}
	case *ast.IndexExpr, *ast.IndexListExpr:
		return goKind{kind: "an instance of a generic type"}
	}
	return goKind{err: fmt.Errorf("cannot follow the declaration in package %s", importPath)}
}

// load parses the package in dir (the files go build would use, without tests) and indexes
// its top-level types. A directory that cannot be read holds no types.
func (c *goTypeChecker) load(dir string) *goPackage {
	if p := c.pkgs[dir]; p != nil {
		return p
	}
	if c.pkgs == nil {
		c.pkgs = map[string]*goPackage{}
	}
	p := &goPackage{types: map[string]*ast.TypeSpec{}, files: map[*ast.TypeSpec]*ast.File{}}
	c.pkgs[dir] = p
	entries, _ := os.ReadDir(dir)
	fset := token.NewFileSet()
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		if ok, err := build.Default.MatchFile(dir, n); err != nil || !ok {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			continue
		}
		if p.name == "" {
			p.name = f.Name.Name
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, s := range g.Specs {
				ts := s.(*ast.TypeSpec)
				p.types[ts.Name.Name] = ts
				p.files[ts] = f
			}
		}
	}
	return p
}

// dir returns the directory of the package importPath.
func (c *goTypeChecker) dir(importPath string) (string, error) {
	for _, elem := range strings.Split(importPath, "/") {
		if elem == "." || elem == ".." || elem == "" {
			return "", fmt.Errorf("%q is not an import path", importPath)
		}
	}
	first, _, _ := strings.Cut(importPath, "/")
	if root := goroot(); root != "" && !strings.Contains(first, ".") {
		if d := filepath.Join(root, "src", filepath.FromSlash(importPath)); isDir(d) {
			return d, nil
		}
	}
	if !c.modsRead {
		c.modsRead = true
		c.mods = readModules(c.catalogDir)
	}
	for _, m := range c.mods {
		if importPath == m.path || strings.HasPrefix(importPath, m.path+"/") {
			d := filepath.Join(m.dir, filepath.FromSlash(strings.TrimPrefix(importPath[len(m.path):], "/")))
			if isDir(d) {
				return d, nil
			}
			return "", fmt.Errorf("package %s is not in %s", importPath, m.dir)
		}
	}
	if root := goroot(); root != "" {
		// The standard library's own dependencies (golang.org/x/...) are vendored in GOROOT.
		if d := filepath.Join(root, "src", "vendor", filepath.FromSlash(importPath)); isDir(d) {
			return d, nil
		}
	}
	return "", fmt.Errorf("no source for package %s: not in GOROOT, and no module of go.mod or go.work provides it", importPath)
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// readModules lists where the modules that the catalog's build can see keep their source,
// longest module path first: go.work's modules and replacements, then the main module's own
// directory, its replacements, vendor/ (when vendor/modules.txt exists), and the module cache
// for what it requires.
func readModules(catalogDir string) []modDir {
	dir, err := filepath.Abs(catalogDir)
	if err != nil {
		return nil
	}
	var out []modDir
	seen := map[string]bool{}
	add := func(path, dir string) {
		if path != "" && !seen[path] {
			seen[path] = true
			out = append(out, modDir{path, dir})
		}
	}
	cache := modCache()
	if work := goWork(dir); work != "" {
		wf := readModFile(work)
		for _, r := range wf.replaces {
			add(r.old, r.dir(filepath.Dir(work), cache))
		}
		for _, use := range wf.uses {
			if !filepath.IsAbs(use) {
				use = filepath.Join(filepath.Dir(work), use)
			}
			add(readModFile(filepath.Join(use, "go.mod")).module, use)
		}
	}
	if gomod := findUp(dir, "go.mod"); gomod != "" {
		mf := readModFile(gomod)
		root := filepath.Dir(gomod)
		add(mf.module, root)
		for _, r := range mf.replaces {
			add(r.old, r.dir(root, cache))
		}
		vendored := isDir(filepath.Join(root, "vendor")) && fileExists(filepath.Join(root, "vendor", "modules.txt"))
		for _, req := range mf.requires {
			if vendored {
				add(req.Path, filepath.Join(root, "vendor", filepath.FromSlash(req.Path)))
			} else if d := cacheDir(cache, req); d != "" {
				add(req.Path, d)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i].path) > len(out[j].path) })
	return out
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

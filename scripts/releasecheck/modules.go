package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"golang.org/x/mod/modfile"
)

// rootPath is the root module's path; every module of the repository is below it.
const rootPath = "github.com/outboxgen/outboxgen"

// unpublished are the modules (directories relative to the repository) that no one outside
// the repository installs: the benchmark, the console's browser tests and this check. Every
// other module is published at the release version and must be used by the trial program.
var unpublished = map[string]bool{
	"bench":                     true,
	"runtime/outboxconsole/e2e": true,
	"scripts/releasecheck":      true,
}

// mod is one module of the repository.
type mod struct {
	Dir     string // relative to the repository, "." for the root
	Path    string
	File    *modfile.File
	GoMod   []byte
	Publish bool
}

// findModules lists every go.mod of the tree at root, the root module first. Directories
// named testdata, vendor or starting with "." or "_" are not searched, as the go command skips
// them.
func findModules(root string) ([]*mod, error) {
	var mods []*mod
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() != "go.mod" {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		rel = filepath.ToSlash(rel)
		f, err := modfile.Parse(rel+"/go.mod", data, nil)
		if err != nil {
			return err
		}
		if f.Module == nil {
			return fmt.Errorf("%s/go.mod: no module line", rel)
		}
		mods = append(mods, &mod{Dir: rel, Path: f.Module.Mod.Path, File: f, GoMod: data, Publish: !unpublished[rel]})
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(mods, func(i, j int) bool { return mods[i].Dir == "." || (mods[j].Dir != "." && mods[i].Dir < mods[j].Dir) })
	if len(mods) == 0 || mods[0].Dir != "." || mods[0].Path != rootPath {
		return nil, fmt.Errorf("%s: not the outboxgen repository (no go.mod of %s at its root)", root, rootPath)
	}
	return mods, nil
}

func skipDir(name string) bool {
	return name == "testdata" || name == "vendor" || name[0] == '.' || name[0] == '_'
}

// readVersion reads outbox.Version from runtime/outbox/version.go: the release being checked.
func readVersion(root string) (string, error) {
	p := filepath.Join(root, "runtime", "outbox", "version.go")
	f, err := parser.ParseFile(token.NewFileSet(), p, nil, 0)
	if err != nil {
		return "", err
	}
	for _, decl := range f.Decls {
		g, ok := decl.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if name.Name != "Version" || i >= len(vs.Values) {
					continue
				}
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					return strconv.Unquote(lit.Value)
				}
			}
		}
	}
	return "", fmt.Errorf("%s: no const Version = \"vX.Y.Z\"", p)
}
